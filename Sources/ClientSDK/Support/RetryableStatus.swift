/// The one rule for which HTTP error statuses are worth asking again, whoever answered (the
/// backplane, a proxy in front of it, a download's origin): the 5xx, and the two 4xx that say
/// "later", 408 (request timeout) and 429 (too many requests, for a while). Any other 4xx gives
/// the same answer however often it is asked, whatever its error code (one a later backplane
/// added included).
enum RetryableStatus {
    static func contains(_ status: Int) -> Bool {
        status >= 500 || status == 408 || status == 429
    }
}
