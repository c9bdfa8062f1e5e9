import ArgumentParser
import ClientSDK
import Foundation

enum Session {
    /// Starts an engine, runs `body`, shuts down, and prints the final status, the events seen and
    /// what `body` returned. Errors end the process with the documented exit codes.
    static func run(_ configuration: BackplaneClientConfiguration, _ body: (BackplaneEngine) async throws -> JSONValue?) async throws {
        let engine = BackplaneEngine(configuration: configuration)
        let events = engine.events()
        var result: JSONValue?
        var failure: BackplaneClientError?
        do {
            try await engine.start()
            result = try await body(engine)
        } catch let error as BackplaneClientError {
            failure = error
        }
        let status = await engine.status
        await engine.shutdown()
        var seen: [EventOutput] = []
        for await event in events { seen.append(EventOutput(event)) }

        var output: [String: JSONValue] = [
            "status": Output.json(StatusOutput(status)),
            "events": .array(seen.map { .string($0.event) }),
        ]
        if let result { output["result"] = result }
        if let failure {
            output["error"] = Output.json(ErrorOutput(failure))
            Output.print(JSONValue.object(output))
            throw ExitCode(Output.exitCode(for: failure))
        }
        Output.print(JSONValue.object(output))
    }

    /// After `start()`, which registers if needed and syncs once: fail unless that sync succeeded.
    static func requireSynced(_ engine: BackplaneEngine) async throws -> JSONValue? {
        let status = await engine.status
        if let error = status.lastError { throw error }
        guard status.isRegistered else {
            throw BackplaneClientError(kind: .notRunning, message: "The device is not registered.")
        }
        return nil
    }
}
