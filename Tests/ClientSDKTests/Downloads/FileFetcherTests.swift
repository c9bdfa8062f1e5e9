import AsyncHTTPClient
import Foundation
import Testing
import TestSupport
@testable import ClientSDK

/// Fetching one file of a download from a real HTTP origin: whole files, resumes, origins that
/// ignore ranges or change files, and the answers that must never be stored.
@Suite struct FileFetcherTests {
    let fetcher = FileFetcher(client: .shared)

    func destination(_ name: String) -> URL {
        temporaryDirectory("fetch").appendingPathComponent(name)
    }

    func partials(beside file: URL) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: file.deletingLastPathComponent().path)) ?? []
        return names.filter { $0.hasSuffix(".partial") || $0.hasSuffix(".partial-info") }
    }

    /// Flushed or not (`DownloadOptions.flushesFiles`), a fetched file ends whole at its path.
    @Test(arguments: [true, false]) func aFileIsFetchedWholeAndNeverAgain(flushes: Bool) async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        let bytes = TestOrigin.content(300_000)
        origin.serve("/movie.mp4", bytes)
        let file = destination("movie.mp4")
        var fetcher = fetcher
        fetcher.flushes = flushes
        let size = try await fetcher.fetch(.init(url: origin.url("/movie.mp4"), allowedMIMETypes: ["video/mp4"]), to: file)
        #expect(size == 300_000)
        #expect(try Data(contentsOf: file) == bytes)
        #expect(partials(beside: file).isEmpty)
        try await fetcher.fetch(.init(url: origin.url("/movie.mp4")), to: file)
        #expect(origin.requests("/movie.mp4") == 1)
    }

    /// A network error reads as a sentence an app can show, not as NIO's text.
    @Test func aRefusedConnectionIsSaidInOneSentence() async throws {
        let refusing = try RefusingPort()
        defer { refusing.close() }
        let port = refusing.port
        let failure = await #expect(throws: DownloadFailure.self) {
            try await fetcher.fetch(.init(url: URL(string: "http://127.0.0.1:\(port)/movie.mp4")!), to: destination("movie.mp4"))
        }
        #expect(failure?.kind == .network)
        #expect(failure?.message.hasSuffix(": the connection was refused (nothing listens there).") == true, "\(failure?.message ?? "")")
        #expect(failure?.message.contains("errno") == false)
    }

    @Test func aDroppedConnectionIsResumedFromWhereItStopped() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        let bytes = TestOrigin.content(500_000)
        origin.serve("/movie.mp4", bytes)
        origin.inject(.dropAfter(bytes: 200_000, times: 1), at: "/movie.mp4")
        let file = destination("movie.mp4")
        let failure = await #expect(throws: DownloadFailure.self) { try await fetcher.fetch(.init(url: origin.url("/movie.mp4")), to: file) }
        #expect(failure?.kind == .network)
        #expect(failure?.isFatal == false)
        #expect(!FileManager.default.fileExists(atPath: file.path))
        let kept = try Data(contentsOf: file.appendingPathExtension("partial")).count
        #expect(kept > 0 && kept <= 200_000)
        let servedBefore = origin.bytesServed("/movie.mp4")

        try await fetcher.fetch(.init(url: origin.url("/movie.mp4")), to: file)
        #expect(try Data(contentsOf: file) == bytes)
        // The second request asked only for what was missing.
        #expect(origin.bytesServed("/movie.mp4") - servedBefore == 500_000 - kept)
        #expect(partials(beside: file).isEmpty)
    }

    @Test func aPartialFileThatIsWholeIsFinishedWithoutARequest() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        let bytes = TestOrigin.content(300_000)
        origin.serve("/movie.mp4", bytes)
        origin.inject(.dropAfter(bytes: 100_000, times: 1), at: "/movie.mp4")
        let file = destination("movie.mp4")
        await #expect(throws: DownloadFailure.self) { try await fetcher.fetch(.init(url: origin.url("/movie.mp4")), to: file) }
        // The app was killed after the last write and before the rename: the partial file is whole.
        let partial = file.appendingPathExtension("partial")
        let handle = try FileHandle(forWritingTo: partial)
        try handle.seekToEnd()
        try handle.write(contentsOf: bytes.dropFirst(Int(try handle.offset())))
        try handle.close()

        #expect(try await fetcher.fetch(.init(url: origin.url("/movie.mp4")), to: file) == 300_000)
        #expect(try Data(contentsOf: file) == bytes)
        #expect(origin.requests("/movie.mp4") == 1, "nothing is asked for a file that is all there")
        #expect(partials(beside: file).isEmpty)
    }

    @Test func resumeInformationWithoutAPartialFileIsStaleAndGoes() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        let bytes = TestOrigin.content(200_000)
        origin.serve("/movie.mp4", bytes)
        let file = destination("movie.mp4")
        // Left by an earlier fetch to this path whose partial file is gone: kept, it would pair
        // with the next partial file after a kill (wrong validator, wrong length).
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(#"{"validator":"\"old\"","totalLength":999999}"#.utf8).write(to: file.appendingPathExtension("partial-info"))

        try await fetcher.fetch(.init(url: origin.url("/movie.mp4")), to: file)
        #expect(try Data(contentsOf: file) == bytes)
        #expect(partials(beside: file).isEmpty, "the stale resume information is gone")
    }

    @Test func anOriginThatIgnoresRangesIsFetchedAgainFromTheStart() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        let bytes = TestOrigin.content(400_000)
        origin.serve("/movie.mp4", bytes)
        origin.inject(.dropAfter(bytes: 150_000, times: 1), at: "/movie.mp4")
        let file = destination("movie.mp4")
        _ = try? await fetcher.fetch(.init(url: origin.url("/movie.mp4")), to: file)
        origin.inject(.ignoreRange, at: "/movie.mp4")
        try await fetcher.fetch(.init(url: origin.url("/movie.mp4")), to: file)
        #expect(try Data(contentsOf: file) == bytes)
    }

    @Test func aFileReplacedOnTheOriginStartsOverAndAChangedSizeWithoutValidatorIsFatal() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        origin.serve("/movie.mp4", TestOrigin.content(400_000))
        origin.inject(.dropAfter(bytes: 150_000, times: 1), at: "/movie.mp4")
        let file = destination("movie.mp4")
        _ = try? await fetcher.fetch(.init(url: origin.url("/movie.mp4")), to: file)
        // A new version: If-Range no longer matches, the origin sends it whole.
        let replaced = TestOrigin.content(420_000, seed: 9)
        origin.serve("/movie.mp4", replaced)
        try await fetcher.fetch(.init(url: origin.url("/movie.mp4")), to: file)
        #expect(try Data(contentsOf: file) == replaced)

        // An origin that ignores If-Range would splice two versions: the size change is fatal.
        let other = destination("other.mp4")
        origin.serve("/other.mp4", TestOrigin.content(400_000))
        origin.inject(.dropAfter(bytes: 150_000, times: 1), at: "/other.mp4")
        _ = try? await fetcher.fetch(.init(url: origin.url("/other.mp4")), to: other)
        origin.serve("/other.mp4", TestOrigin.content(410_000, seed: 5))
        origin.inject(.ignoreIfRange, at: "/other.mp4")
        let failure = await #expect(throws: DownloadFailure.self) { try await fetcher.fetch(.init(url: origin.url("/other.mp4")), to: other) }
        #expect(failure?.kind == .sizeChanged)
        #expect(failure?.isFatal == true)
    }

    @Test func anAnswerOfTheWrongTypeIsFatalAndNothingIsStored() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        origin.serve("/segment.ts", Data("<html>Sign in to the hotel Wi-Fi</html>".utf8), contentType: "text/html; charset=utf-8")
        let file = destination("segment.ts")
        let failure = await #expect(throws: DownloadFailure.self) {
            try await fetcher.fetch(.init(url: origin.url("/segment.ts"), allowedMIMETypes: ["video/mp2t"]), to: file)
        }
        #expect(failure?.kind == .mimeType)
        #expect(failure?.isFatal == true)
        #expect(!FileManager.default.fileExists(atPath: file.path))
        #expect(partials(beside: file).isEmpty)
    }

    @Test func anErrorStatusIsReportedWithTheStatus() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        origin.serve("/movie.mp4", TestOrigin.content(1000))
        origin.inject(.failFirst(1, status: 503), at: "/movie.mp4")
        let file = destination("movie.mp4")
        let failure = await #expect(throws: DownloadFailure.self) { try await fetcher.fetch(.init(url: origin.url("/movie.mp4")), to: file) }
        #expect(failure?.kind == .http)
        #expect(failure?.status == 503)
        #expect(failure?.isFatal == false)
        try await fetcher.fetch(.init(url: origin.url("/movie.mp4")), to: file)
        #expect(try Data(contentsOf: file) == TestOrigin.content(1000))
        let missing = await #expect(throws: DownloadFailure.self) { try await fetcher.fetch(.init(url: origin.url("/nothing")), to: destination("x")) }
        #expect(missing?.status == 404)
    }

    @Test func aByteRangeSegmentIsCutFromItsFileEvenWhenTheOriginSendsItAll() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        let bytes = TestOrigin.content(200_000)
        origin.serve("/main.mp4", bytes)
        let range = ByteRange(length: 70_000, offset: 100_000)
        let ranged = destination("seg1.mp4")
        try await fetcher.fetch(.init(url: origin.url("/main.mp4"), byteRange: range), to: ranged)
        #expect(try Data(contentsOf: ranged) == bytes[100_000..<170_000])
        #expect(origin.bytesServed("/main.mp4") == 70_000)

        origin.inject(.ignoreRange, at: "/main.mp4")
        let whole = destination("seg1.mp4")
        try await fetcher.fetch(.init(url: origin.url("/main.mp4"), byteRange: range), to: whole)
        #expect(try Data(contentsOf: whole) == bytes[100_000..<170_000])
    }

    /// The storage rules' free space, read without Foundation's dictionary, is Foundation's figure.
    @Test func theFreeSpaceIsTheVolumesOwnFigure() throws {
        for url in [FileManager.default.temporaryDirectory, URL(fileURLWithPath: "/")] {
            let ours = try #require(LocalFiles.freeBytes(on: url))
            let attributes = try FileManager.default.attributesOfFileSystem(forPath: url.path)
            let foundation = try #require((attributes[.systemFreeSize] as? NSNumber)?.int64Value)
            // Other processes write meanwhile.
            #expect(abs(ours - foundation) < 64 << 20, "\(url.path): \(ours) vs \(foundation)")
        }
        #expect(LocalFiles.freeBytes(on: URL(fileURLWithPath: "/no/such/volume/here")) == nil)
    }
}
