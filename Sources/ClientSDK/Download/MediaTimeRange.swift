import Foundation

/// Part of a title, by time (`DownloadRequest.timeRange`): seconds from the start of the title
/// as its playlists or MPD count them. The engine fetches only the segments that overlap the
/// range, whole (a segment is the smallest thing it can cut), so what is on disk starts at the
/// segment boundary at or before `start` and ends at the one at or after `end`, and the local
/// playlist or MPD describes exactly that and plays it from its first frame. A DASH
/// Representation with no segment information (one file played whole) cannot be cut, and is
/// kept whole.
public struct MediaTimeRange: Sendable, Equatable, Codable {
    /// Seconds from the title's start: 0 or more.
    public var start: Double
    /// Seconds from the title's start, past `start`; nil: to the end.
    public var end: Double?

    public init(start: Double = 0, end: Double? = nil) {
        self.start = start
        self.end = end
    }

    /// Whether media from `from` lasting `duration` seconds has any part in the range.
    func overlaps(from: Double, duration: Double) -> Bool {
        from < (end ?? .infinity) && from + max(duration, 0) > start
    }

    /// Why the SDK would refuse this range, or nil.
    var problem: String? {
        guard start.isFinite, start >= 0 else { return "The time range's start must be 0 or more seconds." }
        if let end {
            guard end.isFinite, end > start else { return "The time range's end must come after its start." }
        }
        return nil
    }

    /// The failure of a title with nothing in the range.
    func nothingIn(_ what: String, lasting seconds: Double) -> DownloadFailure {
        let to = end.map { "to \(Self.text($0)) s" } ?? "to the end"
        return DownloadFailure(
            .playlist, "\(what) lasts \(Self.text(seconds)) s: nothing of it lies in the time range from \(Self.text(start)) s \(to).")
    }

    private static func text(_ seconds: Double) -> String { String(format: "%.3f", seconds) }
}
