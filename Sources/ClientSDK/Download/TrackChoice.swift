/// The request's rule for the streams beside the video, as DASH and Smooth Streaming apply it
/// (HLS chooses renditions in its master playlist's groups): every audio and text stream in
/// the languages asked for (`audioLanguages`, `subtitleLanguages`; nil: all, empty: none), each
/// at the best bit rate it offers, named `audio-<k>` and `text-<k>` in manifest order.
enum TrackChoice {
    static func byLanguage<Stream, Level>(
        _ streams: [Stream], request: DownloadRequest, kind: (Stream) -> TrackKind, language: (Stream) -> String?,
        levels: (Stream) -> [Level], bitrate: (Level) -> Int
    ) -> [(stream: Stream, level: Level, name: String)] {
        var chosen: [(stream: Stream, level: Level, name: String)] = []
        for (wanted, languages, name) in [(TrackKind.audio, request.audioLanguages, "audio"), (.text, request.subtitleLanguages, "text")] {
            var count = 0
            for stream in streams where kind(stream) == wanted {
                if let languages {
                    guard let spoken = language(stream), LanguageCodes.matches(spoken, anyOf: languages) else { continue }
                }
                guard let level = BitrateChoice.choose(levels(stream), maxBitrate: nil, bandwidth: bitrate) else { continue }
                chosen.append((stream, level, "\(name)-\(count)"))
                count += 1
            }
        }
        return chosen
    }
}
