import Foundation

extension DownloadManager {
    /// The driver of one batch: reads the requests as slots free and hands them to the manager, new work first.
    ///
    /// A request whose file an earlier download delivered (`hasDeliveredFile`) costs a `HEAD` and usually nothing
    /// more, so it is parked (`RequestSpill`, on disk) and the intake reads on: the same list run again after an
    /// interruption starts on the files it lacks at once instead of asking about every finished one first. A parked
    /// request goes to the manager whenever the batch has nothing else in flight (one at a time, so a new request
    /// found meanwhile waits for at most that one), and all of them once the intake has ended.
    struct BatchFeeder {
        let manager: DownloadManager
        let batch: Batch
        private var parked: RequestSpill?
        private var canPark = true

        init(manager: DownloadManager, batch: Batch) {
            self.manager = manager
            self.batch = batch
        }

        /// Reads the whole sequence (unless the consumer leaves or the manager shuts down), then ends the intake.
        mutating func run(_ requests: some AsyncSequence<DownloadRequest, Never>) async {
            var intake = requests.makeAsyncIterator()
            var intakeEnded = false
            // The slot first, then the request: a request is read only when it can be taken.
            while await batch.take() {
                if !intakeEnded {
                    guard let request = await intake.next(isolation: nil) else {
                        intakeEnded = true
                        batch.give()
                        continue
                    }
                    if park(request) {
                        batch.give()  // a parked request holds no slot
                        guard await submitParkedIfIdle() else { break }
                        continue
                    }
                    guard await manager.submit(request, to: batch) else { break }
                } else {
                    guard let request = parked?.next() else {
                        batch.give()
                        break
                    }
                    guard await manager.submit(request, to: batch) else { break }
                }
            }
            parked = nil
            batch.endIntake()
        }

        /// Parks a request whose file an earlier download delivered. - Returns: whether it was parked.
        private mutating func park(_ request: DownloadRequest) -> Bool {
            guard canPark, manager.hasDeliveredFile(request) else { return false }
            if parked == nil {
                parked = RequestSpill(in: manager.directory.state)
                canPark = parked != nil
            }
            return parked?.park(request) ?? false
        }

        /// With nothing of the batch in flight, hands over one parked request: the intake keeps the CPU (a rerun of a
        /// long list reads past its finished files first), and a pipe that writes slowly still sees progress.
        /// - Returns: `false` when the batch is over (the consumer left, or the manager shuts down).
        private mutating func submitParkedIfIdle() async -> Bool {
            guard let parked, parked.count > 0, batch.inFlightCount == 0 else { return true }
            guard await batch.take() else { return false }
            guard let request = parked.next() else {
                batch.give()
                return true
            }
            return await manager.submit(request, to: batch)
        }
    }

    /// Whether an earlier download of this request's URL delivered a file where this one would put it (its extended
    /// attributes name the URL): a local look, without reading the file; the transfer decides whether it is reused.
    nonisolated func hasDeliveredFile(_ request: DownloadRequest) -> Bool {
        let url = request.url.withoutCredentials
        return FileRecord.recordsOrigin(atPath: directory.deliveredFilePath(of: url, options: request.options), url)
    }
}
