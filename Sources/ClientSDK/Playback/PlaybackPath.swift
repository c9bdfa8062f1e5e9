import Foundation

/// A playback URL's path: `/<token>/<asset id, percent-encoded>/<path in the asset's directory>`.
/// Anything else, a wrong token, or a path that could leave the asset's directory (`..`, `.`,
/// an empty or encoded-slash segment, a NUL after the asset id) is nil: the server answers 404.
struct PlaybackPath: Equatable {
    var assetId: String
    var relativePath: String

    /// What a path segment keeps as is; every other byte is percent-encoded.
    static let segmentCharacters = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    static func path(token: String, assetId: String, relativePath: String) -> String {
        let encoded = { (text: String) in text.addingPercentEncoding(withAllowedCharacters: segmentCharacters) ?? "" }
        return "/" + token + "/" + encoded(assetId) + "/" + relativePath.split(separator: "/").map { encoded(String($0)) }.joined(separator: "/")
    }

    /// Whether the path starts with the token, whatever follows: the request comes from a
    /// holder of the token (a player), even when it names nothing (`PlaybackConnectionGuard`).
    static func carriesToken(_ uri: String, token: String) -> Bool {
        let segments = uri.utf8.split(separator: UInt8(ascii: "/"), maxSplits: 2, omittingEmptySubsequences: false)
        return segments.count == 3 && segments[0].isEmpty && segments[1].elementsEqual(token.utf8)
    }

    init?(uri: String, token: String) {
        guard uri.utf8.count <= 4096 else { return nil }
        // The query (a player's cache buster) and fragment play no part.
        let path = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        guard segments.count >= 4, segments[0].isEmpty, segments[1] == token else { return nil }
        // The asset id is any string (it names a hex directory, never a path).
        guard let assetId = String(segments[2]).removingPercentEncoding, !assetId.isEmpty else { return nil }
        var decoded: [String] = []
        for segment in segments.dropFirst(3) {
            guard let text = String(segment).removingPercentEncoding, !text.isEmpty, text != ".", text != "..",
                !text.contains("/"), !text.contains("\0")
            else { return nil }
            decoded.append(text)
        }
        self.assetId = assetId
        relativePath = decoded.joined(separator: "/")
    }
}
