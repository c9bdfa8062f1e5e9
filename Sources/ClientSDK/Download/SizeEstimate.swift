import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

/// What an asset will take on the device, known before its download starts
/// (`DownloadManager.estimate(_:)`), and whether the storage rules leave it that much.
public struct DownloadEstimate: Sendable, Equatable {
    /// Bytes its files will take (`DownloadAsset.estimatedBytes` once queued).
    public var bytes: Int64
    /// What `bytes` rests on: every size stated, the first files' sizes scaled to the rest, or
    /// only the manifest's declared bandwidth × duration.
    public var basis: EstimateBasis
    /// Every file's size is known (from the manifest's byte ranges or the origin's answers);
    /// otherwise the estimate is inexact (`basis` says how).
    public var isExact: Bool { basis == .exact }
    /// Bytes `maxStorage` and `headroom` leave it now, after the assets queued ahead of it (for
    /// a request not queued yet: after the whole queue).
    public var room: Int64

    /// How many bytes it lacks; nil when it fits.
    public var shortfall: Int64? { bytes > room ? bytes - room : nil }

    public init(bytes: Int64, basis: EstimateBasis, room: Int64) {
        self.bytes = bytes
        self.basis = basis
        self.room = room
    }

    /// An estimate that is exact or, when not, measured.
    public init(bytes: Int64, isExact: Bool, room: Int64) {
        self.init(bytes: bytes, basis: isExact ? .exact : .measured, room: room)
    }
}

/// What a size estimate rests on, weakest first.
public enum EstimateBasis: Int, Sendable, Comparable, CustomStringConvertible {
    /// The manifest's declared bandwidth (HLS `BANDWIDTH` or `AVERAGE-BANDWIDTH`, DASH
    /// `@bandwidth`) × duration only: the origin stated no size. Manifests state peaks, so it
    /// often overshoots by a quarter or more.
    case bandwidth = 0
    /// The first files' sizes, scaled to the rest: within a few per cent for an encoder's
    /// steady output.
    case measured = 1
    /// Every size stated (byte ranges, answers).
    case exact = 2

    public static func < (lhs: EstimateBasis, rhs: EstimateBasis) -> Bool { lhs.rawValue < rhs.rawValue }

    /// A stable name, e.g. for the harness.
    public var description: String {
        switch self {
        case .bandwidth: "bandwidth"
        case .measured: "measured"
        case .exact: "exact"
        }
    }
}

/// Works out an asset's size from its plan before its download starts. A file whose byte range
/// the manifest states is that long; a flat file is asked of the origin (`size(of:)`: `HEAD`,
/// else a one-byte ranged `GET`); a segmented stream (the files of one directory of the plan)
/// has its first `samplesPerStream` segments asked, and the rest scaled from them: their
/// bandwidth × duration estimates by the ratio of the sizes asked to their own estimates, or,
/// without bandwidth, the average of the sizes asked. Manifests state peak bandwidths, so the
/// bandwidth alone often overshoots by a quarter; the first segments bring it within a few per
/// cent for an encoder's steady output. When the origin answers for too little of a stream
/// (it refuses both requests), the manifest's declared bandwidth × duration of the chosen
/// streams is the estimate (`.bandwidth`); without one there is none.
struct SizeEstimator: Sendable {
    let client: HTTPClient
    /// Segments of each stream whose size is asked of the origin.
    static let samplesPerStream = 3
    /// Size requests under way at once.
    static let parallelRequests = 8
    /// How long one size request may take.
    static let timeout = TimeAmount.seconds(10)

    /// Most files whose size is asked for one asset (a DASH asset of many Periods has a stream
    /// per Period and track), and how long the asking may take in all.
    static let maxAsked = 48
    static let deadline = Duration.seconds(20)

    /// The plan's size, or nil when neither the origin nor the manifest says enough.
    func estimate(_ plan: DownloadPlan) async -> (bytes: Int64, basis: EstimateBasis)? {
        var streams: [Substring: [DownloadFile]] = [:]
        var order: [Substring] = []
        for file in plan.files {
            let stream = file.relativePath.lastIndex(of: "/").map { file.relativePath[..<$0] } ?? ""
            if streams[stream] == nil { order.append(stream) }
            streams[stream, default: []].append(file)
        }
        // What to ask: in each stream the first files of each sort (those with a bandwidth
        // estimate, the segments; those without, init sections and keys), unless their range is known.
        var asked: [URL] = []
        for stream in order {
            let unranged = streams[stream]!.filter { $0.byteRange == nil }
            asked += unranged.filter { $0.estimatedBytes != nil }.prefix(Self.samplesPerStream).map(\.url)
            asked += unranged.filter { $0.estimatedBytes == nil }.prefix(Self.samplesPerStream).map(\.url)
        }
        var unique: Set<URL> = []
        let sizes = await self.sizes(of: Array(asked.filter { unique.insert($0).inserted }.prefix(Self.maxAsked)), within: Self.deadline)
        var total = plan.written.reduce(Int64(0)) { $0.addingClamped(Int64($1.text.utf8.count)) }
        var basis = EstimateBasis.exact
        for stream in order {
            let files = streams[stream]!
            for file in files { if let range = file.byteRange { total = total.addingClamped(Int64(range.length)) } }
            let unranged = files.filter { $0.byteRange == nil }
            for estimated in [true, false] {
                let group = unranged.filter { ($0.estimatedBytes != nil) == estimated }
                guard let bytes = Self.extrapolate(group, sizes: sizes) else { return Self.declared(plan) }
                total = total.addingClamped(bytes.bytes)
                basis = min(basis, bytes.basis)
            }
        }
        return (total, basis)
    }

    /// The manifest's word alone: the chosen streams' declared bandwidth × duration
    /// (`DownloadPlan.estimatedBytes`) and the files the plan writes; nil without a bandwidth.
    static func declared(_ plan: DownloadPlan) -> (bytes: Int64, basis: EstimateBasis)? {
        guard let bandwidth = plan.estimatedBytes else { return nil }
        let written = plan.written.reduce(Int64(0)) { $0.addingClamped(Int64($1.text.utf8.count)) }
        return (written.addingClamped(bandwidth), .bandwidth)
    }

    /// The bytes of `group` (files of one sort in one stream) from the sizes the origin gave.
    private static func extrapolate(_ group: [DownloadFile], sizes: [URL: Int64]) -> (bytes: Int64, basis: EstimateBasis)? {
        guard !group.isEmpty else { return (0, .exact) }
        let known = group.compactMap { sizes[$0.url] }
        let knownSum = known.reduce(Int64(0)) { $0.addingClamped($1) }
        let unknown = group.filter { sizes[$0.url] == nil }
        if unknown.isEmpty { return (knownSum, .exact) }
        let guesses = unknown.compactMap(\.estimatedBytes)
        if guesses.count == unknown.count {
            // Scaled by how the files answered compare with their own estimates.
            let answered = group.filter { sizes[$0.url] != nil }
            let answeredGuess = answered.compactMap(\.estimatedBytes).reduce(Int64(0)) { $0.addingClamped($1) }
            let measured = answeredGuess > 0 && answered.count == answered.compactMap(\.estimatedBytes).count
            let ratio = measured ? Double(knownSum) / Double(answeredGuess) : 1
            let rest = Int64(nonNegative: Double(guesses.reduce(Int64(0)) { $0.addingClamped($1) }) * ratio) ?? .max
            return (knownSum.addingClamped(rest), measured ? .measured : .bandwidth)
        }
        guard !known.isEmpty else { return nil }
        return (knownSum.addingClamped((knownSum / Int64(known.count)).multipliedClamped(by: Int64(unknown.count))), .measured)
    }

    /// The sizes the origin states for `urls`, `parallelRequests` at a time; a URL it does not
    /// answer for is left out.
    func sizes(of urls: [URL], within limit: Duration) async -> [URL: Int64] {
        let deadline = ContinuousClock.now + limit
        // Once the origin has refused a `HEAD`, the rest go straight to the ranged `GET`.
        let origin = OriginAnswers()
        return await withTaskGroup(of: (URL, Int64?).self) { group in
            var next = urls.startIndex
            var sizes: [URL: Int64] = [:]
            func add() {
                guard next < urls.endIndex else { return }
                let url = urls[next]
                next += 1
                group.addTask { (url, await size(of: url, origin: origin)) }
            }
            for _ in 0..<Self.parallelRequests { add() }
            while let (url, size) = await group.next() {
                if let size { sizes[url] = size }
                // Past the deadline the rest are not asked; the answers already asked for are waited for.
                if ContinuousClock.now < deadline { add() }
            }
            return sizes
        }
    }

    /// The size of the file at `url`: `HEAD`'s `Content-Length`, digits only; when the origin
    /// does not answer `HEAD` with a `200` (many CDNs and signed URLs allow only `GET`), the
    /// ranged `GET`'s (`sizeByRange`); nil when neither says.
    func size(of url: URL, origin: OriginAnswers = OriginAnswers()) async -> Int64? {
        if !origin.refusesHead {
            var head = HTTPClientRequest(url: url.absoluteString)
            head.method = .HEAD
            let response = try? await client.execute(head, timeout: Self.timeout)
            // An answer whose length is not digits is no size, and not a reason to ask again.
            if let response, response.status == .ok {
                return response.headers.first(name: "content-length").flatMap { Int64(httpDecimal: $0) }
            }
            origin.refusesHead = true
        }
        return await sizeByRange(url)
    }

    /// The size a `GET` of the first byte (`Range: bytes=0-0`) states: a `206`'s `Content-Range`
    /// total, read strictly (exactly the byte asked for, and a total, not `*`), or the
    /// `Content-Length` of a `200` from an origin that ignores ranges. No byte of the body is
    /// read: the answer is dropped, which closes its connection, so an origin that sends the
    /// whole file costs what is in flight, never a download.
    func sizeByRange(_ url: URL) async -> Int64? {
        var get = HTTPClientRequest(url: url.absoluteString)
        get.headers.add(name: "Range", value: ContentRange.request(from: 0, through: 0))
        guard let response = try? await client.execute(get, timeout: Self.timeout) else { return nil }
        switch response.status.code {
        case 206:
            guard let range = response.headers.first(name: "content-range").flatMap(ContentRange.init), range.first == 0, range.last == 0
            else { return nil }
            return range.complete
        case 200:
            return response.headers.first(name: "content-length").flatMap { Int64(httpDecimal: $0) }
        default:
            return nil
        }
    }
}

/// What an origin showed while its sizes were asked: a refused `HEAD` is not asked again.
final class OriginAnswers: Sendable {
    private let headRefused = Atomic(false)

    var refusesHead: Bool {
        get { headRefused.load(ordering: .relaxed) }
        set { headRefused.store(newValue, ordering: .relaxed) }
    }
}
