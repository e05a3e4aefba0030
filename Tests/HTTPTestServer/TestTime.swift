import Foundation

/// How long a test may wait for what it expects on this run's machine.
///
/// Every wait in the tests is a bound that only a broken build reaches, never a pace. A run that makes everything
/// many times slower — ThreadSanitizer beside the whole suite, where every test starts at once on two cores (440 s in
/// CI, where the plain suite takes 150 s) — sets `DOWNLOADER_TEST_TIME_SCALE`, and every bound grows by that factor.
public enum TestTime {
    /// The factor from `DOWNLOADER_TEST_TIME_SCALE` (at least 1; 1 when unset).
    public static let scale: Double =
        ProcessInfo.processInfo.environment["DOWNLOADER_TEST_TIME_SCALE"].flatMap(Double.init).map { max(1, $0) } ?? 1

    /// A bound for this run: `duration` times the scale.
    /// - Parameter duration: the bound on an ordinary run.
    /// - Returns: the bound here.
    public static func scaled(_ duration: Duration) -> Duration {
        duration * scale
    }

    /// A download's stall timeout in tests (`Configuration.stallTimeout`, 10 s on an ordinary run): it grows by the
    /// square root of the scale only, since the watchdog is also what recovers a request that really is stuck.
    public static var stallTimeout: TimeInterval { 10 * scale.squareRoot() }

    /// Whole minutes for a suite's time limit: `minutes` times the scale.
    /// - Parameter minutes: the limit on an ordinary run.
    /// - Returns: the limit here.
    public static func minutes(_ minutes: Int) -> Int {
        Int((Double(minutes) * scale).rounded(.up))
    }

    /// The instant a wait of `duration` (scaled) gives up.
    /// - Parameter duration: the bound on an ordinary run.
    /// - Returns: now plus the scaled bound.
    public static func deadline(in duration: Duration) -> ContinuousClock.Instant {
        .now + scaled(duration)
    }
}
