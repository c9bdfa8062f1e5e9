import Foundation

/// What downloading an asset means: every file to fetch, and the files the download writes
/// itself once they are in (an HLS asset's local playlists). Made once, when the asset is
/// queued; carried out, resumed and checked from this, never from the origin's playlists again.
struct DownloadPlan: Sendable, Codable, Equatable {
    var files: [DownloadFile]
    /// Written once every fetched file is in, by path relative to the asset's directory.
    var written: [WrittenFile] = []
    /// The file a player opens, relative to the asset's directory.
    var mainPath: String
    /// Bandwidth × duration of the chosen streams, when the playlists say their bandwidth.
    var estimatedBytes: Int64?
    /// DASH: the chosen streams' `ContentProtection`; Smooth Streaming: its protection headers
    /// so (`SmoothProtection`); for the license provider.
    var contentProtection: [ContentProtection]? = nil
    /// HLS: the key ids of keys that are not files (`LicenseRequest.keyIds`).
    var keyIds: [Data]? = nil

    struct WrittenFile: Sendable, Codable, Equatable {
        var path: String
        var text: String
    }
}

/// One file of a download: where it comes from and where it goes in the asset's directory.
struct DownloadFile: Sendable, Equatable, Codable {
    var url: URL
    var byteRange: ByteRange?
    /// Relative to the asset's directory.
    var relativePath: String
    /// Media is checked against the asset's MIME allow-list; keys and playlists are not.
    var isMedia: Bool
    /// Bytes expected before the answer says (bandwidth × duration); nil when unknown.
    var estimatedBytes: Int64?
    /// One of the request's ancillary files: a failure is reported, not the asset's.
    var isAncillary: Bool = false
    /// The size its format fixes or bounds (a key, an init section), checked as it arrives.
    var sizeRule: FileSizeRule?
    /// What it is to a player (CMCD's object type); nil in plans made before it was kept.
    var role: MediaRole?
    /// Its stream's declared bit rate, bits per second, when the playlist or MPD says it.
    var bitrate: Int?

    init(
        url: URL, byteRange: ByteRange?, relativePath: String, isMedia: Bool, estimatedBytes: Int64? = nil, isAncillary: Bool = false,
        sizeRule: FileSizeRule? = nil, role: MediaRole? = nil, bitrate: Int? = nil
    ) {
        self.role = role
        self.bitrate = bitrate
        self.url = url
        self.byteRange = byteRange
        self.relativePath = relativePath
        self.isMedia = isMedia
        self.estimatedBytes = estimatedBytes
        self.isAncillary = isAncillary
        self.sizeRule = sizeRule
    }

    /// The URL's extension when it is a short alphanumeric one, else `fallback`: local names
    /// keep a file's type without taking anything else from the origin.
    static func fileExtension(_ url: URL, default fallback: String) -> String {
        let ext = url.pathExtension.lowercased()
        return (1...5).contains(ext.count) && ext.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) ? ext : fallback
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        url = try container.decode(URL.self, forKey: .url)
        byteRange = try container.decodeIfPresent(ByteRange.self, forKey: .byteRange)
        relativePath = try container.decode(String.self, forKey: .relativePath)
        isMedia = try container.decode(Bool.self, forKey: .isMedia)
        estimatedBytes = try container.decodeIfPresent(Int64.self, forKey: .estimatedBytes)
        // Plans kept before ancillary files existed have none.
        isAncillary = try container.decodeIfPresent(Bool.self, forKey: .isAncillary) ?? false
        // Plans kept before size rules existed have none: their keys and init sections are
        // held to the storage rules only, as they were when planned.
        sizeRule = try container.decodeIfPresent(FileSizeRule.self, forKey: .sizeRule)
        // Plans kept before CMCD have neither; a role written by a later SDK that this one does
        // not know reads as none, not as a broken plan.
        role = (try? container.decodeIfPresent(MediaRole.self, forKey: .role)) ?? nil
        bitrate = try container.decodeIfPresent(Int.self, forKey: .bitrate)
    }
}

/// The layout of an asset's directory that every format shares: what a downloader fetched to
/// make its plan, and the plan, live under `original/`, which is not the asset's media (not
/// counted in its size, kept when its media is removed to be fetched again).
enum AssetLayout {
    static let originalDirectory = "original"
    static let plan = "original/plan.json"
    /// Names a downloaded file may not take at the top of the directory.
    static let reservedNames: Set<String> = [originalDirectory, ancillaryDirectory]
    /// Where a request's ancillary files go (`AncillaryFile`).
    static let ancillaryDirectory = "ancillary"
    /// Where an HLS asset's key files go, sealed (`KeyVault`).
    static let keysDirectory = "keys"

    static func isKey(_ relativePath: String) -> Bool { relativePath.hasPrefix(keysDirectory + "/") }
}

extension DownloadPlan {
    /// The plan kept in `directory`, or nil (none yet, or one this version cannot read).
    static func kept(in directory: URL) -> DownloadPlan? {
        guard let data = try? Data(contentsOf: directory.appendingPathComponent(AssetLayout.plan, isDirectory: false)) else { return nil }
        return try? JSONDecoder().decode(DownloadPlan.self, from: data)
    }

    /// Keeps the plan in `directory`. The download is carried out from it whenever it runs, also
    /// after a system crash: the plan and the manifests (each flushed before its rename) are
    /// flushed, then their names, up to the data directory.
    func keep(in directory: URL, assetId: String) async throws(DownloadFailure) {
        let planFile = directory.appendingPathComponent(AssetLayout.plan, isDirectory: false)
        do {
            try JSONEncoder().encode(self).write(to: planFile, options: .atomic)
            try await LocalFiles.waitingForTheDisk {
                try LocalFiles.flush(path: planFile, fully: false)
                try LocalFiles.flush(path: directory.appendingPathComponent(AssetLayout.originalDirectory), isDirectory: true, fully: false)
                try LocalFiles.flushAssetDirectory(directory)
            }
        } catch {
            throw DownloadFailure(.storage, "Could not keep the plan of \(assetId): \(error).")
        }
    }
}
