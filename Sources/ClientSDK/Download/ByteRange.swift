/// A part of a file, `length` bytes from `offset`: an HLS `EXT-X-BYTERANGE`, a DASH `indexRange`
/// or `range`, a `sidx` reference. In a file of its own, beside no parser, so that each format's
/// parser (and its fuzz target) compiles without the other's.
struct ByteRange: Hashable, Sendable, Codable {
    var length: Int
    var offset: Int
    /// As an HTTP `Range` header value.
    var httpRange: String { "bytes=\(offset)-\(offset + length - 1)" }
}
