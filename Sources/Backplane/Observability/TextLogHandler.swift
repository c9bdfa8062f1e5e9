import Foundation
import Logging

/// The text log format (`serve`'s default): the lines of swift-log's `StreamLogHandler`,
/// `time level label : key=value … [source] message`, with the metadata rendered when a line
/// is written instead of each time it changes. Hummingbird sets a request id on every request's
/// logger, and `StreamLogHandler` rendered all of its metadata then: over 2 % of a quiet sync's
/// time in a profile, with nothing logged at all.
public struct TextLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    private let label: String
    private let write: @Sendable (Data) -> Void

    /// Lines go to standard error, as `JSONLogHandler`'s do.
    public init(label: String, write: @escaping @Sendable (Data) -> Void = JSONLogHandler.standardError) {
        self.label = label
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let all = event.metadata.map { metadata.merging($0) { $1 } } ?? metadata
        let fields = all.sorted { $0.key < $1.key }.map { " \($0.key)=\($0.value)" }.joined()
        write(Data("\(Self.timestamp()) \(event.level) \(label) :\(fields) [\(event.source)] \(event.message)\n".utf8))
    }

    /// Local time with its offset, as `StreamLogHandler` writes it.
    static func timestamp() -> String {
        var now = time(nil)
        var local = tm()
        localtime_r(&now, &local)
        var buffer = [CChar](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &local)
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
