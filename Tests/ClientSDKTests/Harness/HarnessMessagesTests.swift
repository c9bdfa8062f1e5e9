import Foundation
import BackplaneWire
import Testing
import TestSupport

/// What the harness tells a person: `download --wait` never waits on an asset that cannot move,
/// network errors read as one sentence, a backplane too slow to answer is said to have timed
/// out, and `--help` lists every exit code.
@Suite(.serialized) struct HarnessMessagesTests {
    typealias ServedBackplane = HarnessEndToEndTests.ServedBackplane

    @Test func aDownloadThatCannotFitExitsAtOnceWithItsBlock() async throws {
        let root = temporaryDirectory("backplane-harness-blocked")
        defer { try? FileManager.default.removeItem(at: root) }
        let backplane = try await ServedBackplane(root: root)
        defer { backplane.process.terminate() }
        let origin = try await TestOrigin.start()
        origin.serve("/film.mp4", Data(repeating: 7, count: 200_000))
        origin.serve("/sequel.mp4", Data(repeating: 8, count: 200_000))
        let harness = try backplane.harness(user: "blocked")
        func download(_ asset: String) async throws -> (status: Int32, output: String) {
            try await ChildProcess.run(harness.binary, [
                "download", "--asset-id", asset, "--url", origin.url("/\(asset).mp4").absoluteString, "--max-storage", "300000", "--wait",
                "--data-dir", root.appendingPathComponent("phone").path,
            ], environment: harness.environment, timeout: .seconds(60))
        }
        let first = try await download("film")
        #expect(first.status == 0, "\(first.output)")
        // The sequel would fit alone, but the film holds the room: it waits for room that
        // nothing the harness does while it waits will make.
        let run = try await download("sequel")
        #expect(run.status == 12, "\(run.output)")
        #expect(run.output.contains("cannot move") && run.output.contains("--max-storage"), "\(run.output)")
        #expect(run.output.contains("\"blocked\""), "the asset is printed with its state: \(run.output)")
        await origin.stop()
    }

    @Test func aDownloadHeldByTheStoodInDeviceExitsWithItsCondition() async throws {
        let root = temporaryDirectory("backplane-harness-conditions")
        defer { try? FileManager.default.removeItem(at: root) }
        let backplane = try await ServedBackplane(root: root)
        defer { backplane.process.terminate() }
        let origin = try await TestOrigin.start()
        origin.serve("/film.mp4", Data(repeating: 7, count: 50_000))
        let harness = try backplane.harness(user: "unplugged")
        func download(_ device: [String]) async throws -> (status: Int32, output: String) {
            try await ChildProcess.run(harness.binary, [
                "download", "--asset-id", "film", "--url", origin.url("/film.mp4").absoluteString, "--wait",
                "--data-dir", root.appendingPathComponent("phone").path,
            ] + device, environment: harness.environment, timeout: .seconds(60))
        }
        let low = try await download(["--unplugged", "--battery", "10", "--min-battery", "20"])
        #expect(low.status == 12, "\(low.output)")
        #expect(low.output.contains("\"battery\"") && low.output.contains("--min-battery"), "\(low.output)")
        #expect(origin.requests(under: "/film.mp4").isEmpty)
        let metered = try await download(["--metered-network", "--require-unmetered"])
        #expect(metered.status == 12 && metered.output.contains("\"meteredNetwork\""), "\(metered.output)")
        // Plugged in, the same minimum does not hold it.
        let charging = try await download(["--battery", "10", "--min-battery", "20"])
        #expect(charging.status == 0, "\(charging.output)")
        await origin.stop()
    }

    @Test func aRefusedConnectionReadsAsOneSentence() async throws {
        let root = temporaryDirectory("backplane-harness-messages")
        defer { try? FileManager.default.removeItem(at: root) }
        let binary = try #require(BuiltProduct.url(named: "backplane-harness"))
        var environment = ProcessInfo.processInfo.environment
        let refusing = try RefusingPort()
        defer { refusing.close() }
        environment["BACKPLANE_URL"] = "http://127.0.0.1:\(refusing.port)"
        environment["BACKPLANE_APP_KEY"] = "ak_nobody"
        environment["BACKPLANE_APP_SECRET"] = "aks_nobody"
        environment["BACKPLANE_USER"] = "nobody"
        let run = try await ChildProcess.run(binary, ["sync", "--data-dir", root.path], environment: environment)
        #expect(run.status == 5, "\(run.output)")
        #expect(run.output.contains("the connection was refused"), "\(run.output)")
        for raw in ["errno", "error set", "NIOConnectionError", "connection reset"] {
            #expect(!run.output.contains(raw), "the message repeats the library's text '\(raw)': \(run.output)")
        }
    }

    @Test func aBackplaneThatDoesNotAnswerIsSaidToHaveTimedOut() async throws {
        let root = temporaryDirectory("backplane-harness-messages")
        defer { try? FileManager.default.removeItem(at: root) }
        let binary = try #require(BuiltProduct.url(named: "backplane-harness"))
        // Accepts connections (the listen backlog) and never answers.
        let silent = try HeldPort()
        defer { silent.close() }
        var environment = ProcessInfo.processInfo.environment
        environment["BACKPLANE_URL"] = "http://127.0.0.1:\(silent.port)"
        environment["BACKPLANE_APP_KEY"] = "ak_nobody"
        environment["BACKPLANE_APP_SECRET"] = "aks_nobody"
        environment["BACKPLANE_USER"] = "nobody"
        let run = try await ChildProcess.run(
            binary, ["sync", "--timeout", "2", "--data-dir", root.path], environment: environment, timeout: .seconds(60))
        #expect(run.status == 5, "\(run.output)")
        #expect(run.output.contains("timed out"), "\(run.output)")
        #expect(!run.output.contains("Could not reach"), "an answer that is late is not an unreachable backplane: \(run.output)")
    }

    @Test func helpListsEveryExitCode() async throws {
        let binary = try #require(BuiltProduct.url(named: "backplane-harness"))
        let run = try await ChildProcess.run(binary, ["--help"])
        for code in ["0", "1", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "130"] {
            #expect(run.output.range(of: "\n  \(code) ") != nil, "--help does not list exit code \(code): \(run.output)")
        }
    }
}
