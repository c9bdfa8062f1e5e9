import Foundation

/// The fault tests (`HarnessKillTests`, `PostgresRestartTests`; their names in
/// scripts/fault-tests.sh) kill the harness twenty times over or restart PostgreSQL under two
/// loaded nodes, and take both cores for minutes: beside the rest of the suite they starve its
/// timing tests. The load tests (`PlaybackServerGuardLoadTests`, `UserTokenURLLoadTests`) run
/// with them for the same reason, and because each measures an answer within 2 s. So they run only when asked, with `BACKPLANE_FAULT_TESTS=1`, which scripts/test
/// (and so CI) sets for a run of their own after the rest. A plain `swift test` skips them, and
/// says so.
public enum FaultTests {
    public static let variable = "BACKPLANE_FAULT_TESTS"
    public static var requested: Bool { ProcessInfo.processInfo.environment[variable] == "1" }
    public static let skipReason =
        "a fault or load test, run alone: BACKPLANE_FAULT_TESTS=1 swift test --filter 'HarnessKillTests|PostgresRestartTests|PlaybackServerGuardLoadTests|UserTokenURLLoadTests' (scripts/test does)"
}
