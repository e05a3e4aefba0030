import Foundation
import HTTPTestServer

@testable import Downloader

/// Batches in the model-based test (issue #34): `download(_:maximumInFlight:)` with a few requests, beside the other
/// calls. Each request is a caller; a completed one leaves the manager once delivered (its file the user's, as after
/// `forget`); requests a shutdown left unread are answered `cancelled`, which only a shutdown (or a removal) allows.
extension ModelRun {
    /// Starts a batch of one to three random requests with one or two in flight.
    func batchStep(_ step: Int) {
        let count = Int.random(in: 1...3, using: &random)
        let limit = Int.random(in: 1...2, using: &random)
        var requests: [(request: DownloadRequest, id: Int)] = []
        for _ in 0..<count {
            let resource = Int.random(in: 0..<model.resources.count, using: &random)
            let (options, expectation) = options(for: resource)
            let id = model.addCaller(
                resource, expectation: expectation, choosesName: options.chosenNaming != nil, epoch: epoch)
            pausedByCaller.remove(resource)
            downloadCallers[resource] = id
            batchCallers.insert(id)
            requests.append((DownloadRequest(model.resources[resource].url, options: options), id))
            trace.append("\(step): batch request r\(resource) #\(id) \(describe(options))")
        }
        trace.append("\(step): batch of \(count), \(limit) in flight")
        let outcomes = self.outcomes
        let strays = self.strayOutcomes
        let results = manager.download(requests.map(\.request), maximumInFlight: limit)
        waiters.append(
            Task {
                var waiting = requests
                for await outcome in results {
                    // Outcomes come in the order downloads end: the first waiting caller of an equal request.
                    guard let index = waiting.firstIndex(where: { $0.request == outcome.request }) else {
                        strays.withLock {
                            $0.append("a batch delivered an outcome nobody asked for: \(outcome.request)")
                        }
                        continue
                    }
                    let id = waiting.remove(at: index).id
                    outcomes.withLock { $0[id] = outcome.result }
                }
                for (request, id) in waiting {
                    outcomes.withLock { $0[id] = .failure(.cancelled(request.url, reason: "never read")) }
                }
            })
    }

    /// A batch's completed download leaves the manager: its file is the user's from then on (checked as forgotten).
    func noteBatchAnswer(_ id: Int, _ result: Result<DownloadReceipt, DownloadError>) {
        guard batchCallers.contains(id), case .success(let receipt) = result, let caller = model.callers[id] else {
            return
        }
        forgotten[receipt.fileURL.standardizedFileURL] = caller.resource
    }
}
