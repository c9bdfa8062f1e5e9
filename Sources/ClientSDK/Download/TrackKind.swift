/// What a stream of a manifest carries, as a DASH AdaptationSet (`contentType`, `mimeType`) or
/// a Smooth Streaming StreamIndex (`Type`) says it: what the request's choices go by.
enum TrackKind: Sendable, Equatable {
    case video, audio, text, other
}
