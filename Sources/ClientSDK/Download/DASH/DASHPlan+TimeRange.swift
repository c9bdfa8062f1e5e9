import Foundation

extension DASHPlan {
    /// Where the Periods of a cut presentation lie (`cut(_:chosen:to:url:)`), for `MPDWriter`.
    struct Timing: Sendable {
        /// Each Period kept, by its index in the manifest: its new start and duration, seconds.
        var periods: [Int: (start: Double, duration: Double?)]
        /// The cut presentation's `mediaPresentationDuration`, when every Period's is known.
        var total: Double?
    }

    /// The chosen tracks cut to the segments that overlap `range` (whole segments), and where
    /// the Periods left then lie. Periods with nothing in the range go; the others start where
    /// the last one ended, so that the local MPD plays from its first frame. In a Period cut at
    /// the front, every track's `presentationTimeOffset` moves by the same time (where its
    /// earliest first segment starts), which keeps audio and video together: a track whose first
    /// segment starts later begins a little after the Period does. A track with no segment
    /// information (one file played whole) cannot be cut, and its Period is kept whole, every
    /// track of it.
    static func cut(
        _ manifest: DASHManifest, chosen: [(choice: Choice, track: DASHTrack)], to range: MediaTimeRange, url: URL
    ) throws(DownloadFailure) -> (chosen: [(choice: Choice, track: DASHTrack)], timing: Timing) {
        // Each track's segments in range, with where each begins in the presentation (seconds).
        // A Period with a track that cannot be cut keeps every track whole, so that its tracks
        // stay on one timeline.
        let uncut = Set(chosen.filter { $0.track.isWholeFile }.map(\.choice.period))
        var kept: [(choice: Choice, track: DASHTrack, first: Double, end: Double)] = []
        for (choice, track) in chosen {
            let period = manifest.periods[choice.period]
            let scale = Double(track.timescale)
            if uncut.contains(choice.period) {
                let duration = period.duration ?? track.seconds
                guard range.overlaps(from: period.start, duration: duration) else { continue }
                kept.append((choice, track, period.start, period.start + duration))
                continue
            }
            let inRange = track.segments.filter { segment in
                range.overlaps(from: period.start + Double(segment.time - track.presentationTimeOffset) / scale, duration: Double(segment.duration) / scale)
            }
            guard let first = inRange.first, let last = inRange.last else { continue }
            var cut = track
            cut.segments = inRange
            kept.append((choice, cut, period.start + Double(first.time - track.presentationTimeOffset) / scale,
                         period.start + Double(last.time.addingClamped(last.duration) - track.presentationTimeOffset) / scale))
        }
        guard !kept.isEmpty else { throw range.nothingIn(url.absoluteString, lasting: manifest.duration ?? presentationEnd(manifest, chosen)) }

        var timing = Timing(periods: [:], total: 0)
        var result: [(choice: Choice, track: DASHTrack)] = []
        let periods = Dictionary(grouping: kept, by: \.choice.period)
        var start = 0.0
        for index in periods.keys.sorted() {
            let tracks = periods[index] ?? []
            let period = manifest.periods[index]
            let whole = uncut.contains(index)
            // Where the Period now begins and ends, in the presentation's time before the cut.
            let from = whole ? period.start : tracks.map(\.first).min() ?? period.start
            let to = whole ? period.duration.map { period.start + $0 } ?? tracks.map(\.end).max() : tracks.map(\.end).max()
            for entry in tracks {
                var track = entry.track
                if !whole {
                    let shift = Int64(nonNegative: ((from - period.start) * Double(track.timescale)).rounded()) ?? 0
                    track.presentationTimeOffset = track.presentationTimeOffset.addingClamped(shift)
                }
                result.append((entry.choice, track))
            }
            let duration = to.map { $0 - from }
            timing.periods[index] = (start, duration)
            if let duration, let total = timing.total { timing.total = total + duration } else { timing.total = nil }
            start += duration ?? 0
        }
        return (result, timing)
    }

    /// Where the chosen tracks end, for a manifest that does not say how long it is.
    private static func presentationEnd(_ manifest: DASHManifest, _ chosen: [(choice: Choice, track: DASHTrack)]) -> Double {
        chosen.map { manifest.periods[$0.choice.period].start + $0.track.seconds }.max() ?? 0
    }
}
