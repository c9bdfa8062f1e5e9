import Foundation
import Logging

/// One JSON object per line, for log shippers (`serve --log-format json`): `time` (ISO 8601 with
/// milliseconds, UTC), `level`, `label`, `message`, then the metadata's keys as strings.
public struct JSONLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    private let label: String
    private let write: @Sendable (Data) -> Void

    public init(label: String, write: @escaping @Sendable (Data) -> Void = Self.standardError) {
        self.label = label
        self.write = write
    }

    /// Log lines go to standard error, as the text format's do; standard output keeps the lines
    /// scripts read (the port, first-run credentials). One line at a time: a long line is
    /// written in several calls, which another thread's line must not come between.
    /// A failed write (a closed pipe, a full disk) loses the line rather than the process.
    public static let standardError: @Sendable (Data) -> Void = { line in
        standardErrorLock.withLock { try? FileHandle.standardError.write(contentsOf: line) }
    }
    private static let standardErrorLock = NSLock()

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var object: [String: String] = [:]
        for (key, value) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }) { object[key] = "\(value)" }
        object["time"] = Date().formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        object["level"] = event.level.rawValue
        object["label"] = label
        object["message"] = "\(event.message)"
        // Sorted keys: lines that diff and grep well. JSONSerialization escapes every control
        // character, so a hostile value cannot break a line in two.
        guard var line = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else { return }
        line.append(UInt8(ascii: "\n"))
        write(line)
    }
}
