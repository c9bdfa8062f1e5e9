import Foundation
import Logging

/// The text log format (`serve`'s default): the lines of swift-log's `StreamLogHandler`,
/// `time level label: key=value … [source] message`, metadata from the logger, the metadata
/// provider, the call and its error (`error.message`, `error.type`), with the metadata rendered
/// when a line is written instead of each time it changes. Hummingbird sets a request id on
/// every request's logger, and `StreamLogHandler` rendered all of its metadata then: work on
/// every request, with nothing logged at all.
public struct TextLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let write: @Sendable (Data) -> Void

    /// Lines go to standard error, as `JSONLogHandler`'s do.
    public init(
        label: String, metadataProvider: Logger.MetadataProvider? = LoggingSystem.metadataProvider,
        write: @escaping @Sendable (Data) -> Void = JSONLogHandler.standardError
    ) {
        self.label = label
        self.metadataProvider = metadataProvider
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var all = metadata
        if let provided = metadataProvider?.get(), !provided.isEmpty { all.merge(provided) { $1 } }
        if let explicit = event.metadata { all.merge(explicit) { $1 } }
        if let error = event.error {
            all["error.message"] = "\(error)"
            all["error.type"] = "\(String(reflecting: type(of: error)))"
        }
        let fields = all.sorted { $0.key < $1.key }.map { " \($0.key)=\($0.value)" }.joined()
        let labelled = label.isEmpty ? "" : " \(label)"
        write(Data("\(Self.timestamp()) \(event.level)\(labelled):\(fields) [\(event.source)] \(event.message)\n".utf8))
    }

    /// Local time with its offset, as `StreamLogHandler` writes it.
    static func timestamp() -> String {
        var now = time(nil)
        var local = tm()
        guard localtime_r(&now, &local) != nil else { return "<unknown>" }
        var buffer = [CChar](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &local)
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
