import Aria2RPC
import Downloader
import Prometheus
import Synchronization

/// `/metrics`: the downloads in Prometheus' text format, read from the manager at each scrape (so a count never
/// drifts from what `aria2.tellStatus` says), beside whatever swift-metrics recorded in the same registry
/// (Hummingbird's request counts and durations, when the command bootstrapped it).
///
/// - `downloader_downloads{state="…"}`: downloads in each state (the library's names);
/// - `downloader_written_bytes` and `downloader_expected_bytes`: over the downloads the manager keeps;
/// - `downloader_download_speed_bytes_per_second`: over the active ones;
/// - `downloader_max_concurrent_downloads`;
/// - `downloader_rpc_authentication_failures_total`: calls with a wrong token or none.
final class ServerMetrics: Sendable {
    let registry: PrometheusCollectorRegistry
    private let states: [DownloadState: Gauge]
    private let bytesWritten: Gauge
    private let bytesExpected: Gauge
    private let speed: Gauge
    private let concurrency: Gauge
    private let authenticationFailures: Counter
    /// The session's count of failures at the last scrape (the counter grows by the difference).
    private let failuresCounted = Mutex(0)

    init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
        func name(_ name: String, unit: String = "", _ help: String) -> MetricNameDescriptor {
            MetricNameDescriptor(namespace: "downloader", metricName: name, unitName: unit, helpText: help)
        }
        var states: [DownloadState: Gauge] = [:]
        for state in [DownloadState.queued, .downloading, .suspended, .idle, .completed, .failed] {
            states[state] = registry.makeGauge(
                descriptor: name("downloads", "Downloads in each state"), labels: [("state", "\(state)")])
        }
        self.states = states
        bytesWritten = registry.makeGauge(
            descriptor: name("written", unit: "bytes", "Bytes written of the downloads the manager keeps"))
        bytesExpected = registry.makeGauge(
            descriptor: name("expected", unit: "bytes", "Bytes expected of the downloads whose length is known"))
        speed = registry.makeGauge(
            descriptor: name("download_speed", unit: "bytes_per_second", "Bytes per second of the active downloads"))
        concurrency = registry.makeGauge(
            descriptor: name("max_concurrent_downloads", "Downloads that may run at once"))
        authenticationFailures = registry.makeCounter(
            descriptor: name("rpc_authentication_failures", unit: "total", "RPC calls with a wrong token or none"))
    }

    /// The text of a scrape, after reading the manager.
    func render(manager: DownloadManager, session: Aria2Session) async -> String {
        var counts: [DownloadState: Int] = [:]
        var written: Int64 = 0
        var expected: Int64 = 0
        var bytesPerSecond = 0.0
        for receipt in await manager.allReceipts {
            counts[receipt.state, default: 0] += 1
            written += receipt.totalBytesWritten
            expected += receipt.totalBytesExpectedToWrite ?? 0
            if receipt.state == .downloading { bytesPerSecond += receipt.bytesPerSecond ?? 0 }
        }
        for (state, gauge) in states { gauge.set(Double(counts[state] ?? 0)) }
        bytesWritten.set(Double(written))
        bytesExpected.set(Double(expected))
        speed.set(bytesPerSecond)
        concurrency.set(Double(await manager.maximumActiveDownloads))
        let failures = await session.authenticationFailures
        let added = failuresCounted.withLock { counted in
            defer { counted = max(counted, failures) }
            return failures - counted
        }
        if added > 0 { authenticationFailures.increment(by: Int64(added)) }
        return registry.emitToString()
    }
}
