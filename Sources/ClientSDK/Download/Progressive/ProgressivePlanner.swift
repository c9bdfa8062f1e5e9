import Foundation

/// A flat file (progressive download): one file, fetched whole, under the URL's file name when
/// it is a safe one. Its plan is its request's, so there is nothing to fetch first and nothing
/// to keep.
struct ProgressivePlanner: DownloadPlanner {
    func prepare(_ request: DownloadRequest, in directory: URL, room: Int64, ceiling: Int64) async throws(DownloadFailure) -> DownloadPlan {
        Self.plan(request)
    }

    func preparedPlan(_ request: DownloadRequest, in directory: URL) -> DownloadPlan? {
        Self.plan(request)
    }

    static func plan(_ request: DownloadRequest) -> DownloadPlan {
        let name = fileName(request.url)
        return DownloadPlan(files: [DownloadFile(url: request.url, byteRange: nil, relativePath: name, isMedia: true, role: .muxed)], mainPath: name)
    }

    /// The URL's file name when it is a safe one (ASCII letters, digits, `._-`, not hidden, not
    /// one of `AssetLayout.reservedNames`), else `download`.
    static func fileName(_ url: URL) -> String {
        let name = url.lastPathComponent
        let safe = !name.isEmpty && name.count <= 120 && !name.hasPrefix(".")
            && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }
        return safe && !AssetLayout.reservedNames.contains(name) ? name : "download"
    }
}
