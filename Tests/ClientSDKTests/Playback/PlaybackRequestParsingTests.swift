@testable import ClientSDK
import Foundation
import Testing

/// What the playback server makes of a player's `Range` header and request path: the numbers
/// and paths are the player's (any app on the device), so every one is checked before use.
@Suite struct PlaybackRequestParsingTests {
    @Test(arguments: [
        (nil, ByteRangeRequest.whole), ("", .whole), ("items=0-5", .whole),
        ("bytes=0-0", .part(0..<1)), ("bytes=0-", .part(0..<1000)), ("bytes=990-5000", .part(990..<1000)),
        ("bytes=-10", .part(990..<1000)), ("bytes=-5000", .part(0..<1000)), ("BYTES= 10 - 19 ", .part(10..<20)),
        ("bytes=1000-", .unsatisfiable), ("bytes=-0", .unsatisfiable), ("bytes=5-4", .unsatisfiable),
        ("bytes=0-1,5-6", .unsatisfiable), ("bytes=", .unsatisfiable), ("bytes=-", .unsatisfiable),
        ("bytes=+5-", .unsatisfiable), ("bytes=9999999999999999999-", .unsatisfiable),
        ("bytes=0-99999999999999999999999", .unsatisfiable), ("bytes=a-b", .unsatisfiable),
    ] as [(String?, ByteRangeRequest)])
    func aRangeHeaderAgainstAThousandBytes(_ header: String?, _ expected: ByteRangeRequest) {
        #expect(ByteRangeRequest(header: header, size: 1000) == expected)
    }

    /// A file not downloaded yet, whose size is unknown: one range goes to the origin, rewritten
    /// from its numbers; anything else asks for the whole file.
    @Test(arguments: [
        ("bytes=10-19", "bytes=10-19"), ("BYTES= 0005 - ", "bytes=5-"), ("bytes=-7", "bytes=-7"), ("bytes=0-0", "bytes=0-0"),
        ("bytes=1-2,4-5", nil), ("bytes=5-2", nil), ("bytes=-0", nil), ("items=1-2", nil), ("bytes=x-y", nil), ("bytes=-", nil),
        ("bytes=1234567890123456789-", nil), ("bytes=+1-2", nil), ("bytes=1-2\r\nX: y", nil),
    ] as [(String, String?)])
    func aRangeForAnOriginIsOneRangeWrittenAgain(header: String, forwarded: String?) {
        #expect(ByteRangeRequest.forwardable(header) == forwarded)
    }

    @Test func anEmptyFileHasNoRangeToServe() {
        #expect(ByteRangeRequest(header: "bytes=0-", size: 0) == .unsatisfiable)
        #expect(ByteRangeRequest(header: "bytes=-1", size: 0) == .unsatisfiable)
        #expect(ByteRangeRequest(header: nil, size: 0) == .whole)
    }

    @Test func aPathIsTheTokenAnAssetAndAFileInItsDirectoryOrNothing() {
        let token = "t0k"
        let parsed = PlaybackPath(uri: "/t0k/a%2Fb/video/1.ts?cache=2", token: token)
        #expect(parsed?.assetId == "a/b" && parsed?.relativePath == "video/1.ts")
        #expect(PlaybackPath(uri: "/t0k/..%2F../index.m3u8", token: token)?.assetId == "../..")  // an id names a hex directory
        for refused in [
            "/t0k/asset", "/t0k/asset/", "/t0k//index.m3u8", "/other/asset/index.m3u8", "/t0k/asset/../x", "/t0k/asset/a%2F..%2F..%2Fx",
            "/t0k/asset/./x", "/t0k/asset/%00", "t0k/asset/x", "/t0k/asset/video//1.ts", "/" + String(repeating: "a", count: 5000),
        ] {
            #expect(PlaybackPath(uri: refused, token: token) == nil, "\(refused)")
        }
        let path = PlaybackPath.path(token: token, assetId: "show 1/é", relativePath: "audio-0/1.aac")
        #expect(path == "/t0k/show%201%2F%C3%A9/audio-0/1.aac")
        let back = PlaybackPath(uri: path, token: token)
        #expect(back?.assetId == "show 1/é" && back?.relativePath == "audio-0/1.aac")
    }
}
