import Foundation

extension DownloadManager {
    /// Publishes progress every 100 ms while transfers run.
    func startTickerIfNeeded() {
        guard ticker == nil, !transfers.isEmpty else { return }
        ticker = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(100))
                guard let self, await self.tick() else { return }
            }
        }
    }

    /// Publishes progress of every running transfer whose counts moved (or, while idle, whose speed fell). Returns
    /// `false` (ending the ticker) when nothing runs.
    private func tick() -> Bool {
        guard !transfers.isEmpty else {
            ticker = nil
            return false
        }
        for (url, var transfer) in transfers where machine.isRunning(url, generation: transfer.generation) {
            guard var record = book[url] else { continue }
            let (written, total) = transfer.box.current
            let speed = transfer.meter.sample(bytes: written)
            let moved = written != record.receipt.totalBytesWritten || total != record.receipt.totalBytesExpectedToWrite
            // While nothing arrives, the falling speed and growing ETA are still published, once a second.
            transfer.idleTicks = moved ? 0 : transfer.idleTicks + 1
            transfers[url] = transfer
            guard moved || (transfer.idleTicks % 10 == 0 && speed != record.receipt.bytesPerSecond) else { continue }
            record.receipt.totalBytesWritten = written
            record.receipt.totalBytesExpectedToWrite = total
            record.receipt.bytesPerSecond = speed
            record.receipt.estimatedTimeRemaining = total.flatMap { total in
                speed.flatMap { $0 > 0 ? Double(max(0, total - written)) / $0 : nil }
            }
            book[url] = record
            emit(.progress(record.receipt))
            for channel in progressHandlers[url] ?? [] { channel.progress(record.receipt) }
        }
        return true
    }
}
