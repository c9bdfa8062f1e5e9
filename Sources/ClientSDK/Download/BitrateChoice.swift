/// The one rule that picks a video stream by bit rate, for HLS variants and DASH Representations
/// alike (`DownloadRequest.maxVideoBitrate`): the highest bandwidth not above the limit, or the
/// lowest when none is (so 0 picks the lowest); no limit picks the highest. Ties go to the first
/// in manifest order.
enum BitrateChoice {
    static func choose<Stream>(_ streams: [Stream], maxBitrate: Int?, bandwidth: (Stream) -> Int) -> Stream? {
        var best: (stream: Stream, bandwidth: Int)?
        var lowest: (stream: Stream, bandwidth: Int)?
        for stream in streams {
            let value = bandwidth(stream)
            if lowest.map({ value < $0.bandwidth }) ?? true { lowest = (stream, value) }
            if let maxBitrate, value > maxBitrate { continue }
            if best.map({ value > $0.bandwidth }) ?? true { best = (stream, value) }
        }
        return (best ?? lowest)?.stream
    }
}
