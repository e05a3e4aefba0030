import Foundation
import HTTPTestServer

/// The seed and trial count of a seeded test: from the environment (to replay a failure or run thousands by hand),
/// else the defaults CI runs; printed, so that every run says how to replay it.
struct SeededTrials {
    let seed: UInt64
    let count: Int

    /// - Parameters:
    ///   - name: the test's name in the printed line.
    ///   - variables: the environment's names for the seed and the count.
    ///   - seed: the default seed.
    ///   - count: the default number of trials.
    init(_ name: String, variables: (seed: String, count: String), seed: UInt64, count: Int) {
        let environment = ProcessInfo.processInfo.environment
        self.seed = environment[variables.seed].flatMap { UInt64($0) } ?? seed
        self.count = environment[variables.count].flatMap { Int($0) } ?? count
        print("\(name): seed \(self.seed), \(self.count) trials (\(variables.seed), \(variables.count) replay it)")
    }

    /// A generator that makes this seed's choices.
    var generator: SeededGenerator { SeededGenerator(seed: seed) }
}
