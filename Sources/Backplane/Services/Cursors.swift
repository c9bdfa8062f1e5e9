import Foundation
import BackplaneWire

// Every opaque cursor the API hands out, in one place. A cursor is base64url of "<kind>:<fields>";
// clients send it back unchanged, and every number or date read from one is range-checked like
// any other input (docs/architecture.md, "Cursors").

extension Date {
    /// Whole milliseconds since 1970: what cursors and the event table hold. Exact inside
    /// `WireLimits.acceptedDates`; saturates outside it instead of trapping, so no date can crash
    /// the conversion.
    var millisecondsSince1970: Int64 {
        let milliseconds = (timeIntervalSince1970 * 1000).rounded()
        guard milliseconds.isFinite else { return milliseconds > 0 ? .max : .min }
        if milliseconds >= 9.2e18 { return .max }
        if milliseconds <= -9.2e18 { return .min }
        return Int64(milliseconds)
    }

    init(millisecondsSince1970 milliseconds: Int64) {
        self.init(timeIntervalSince1970: Double(milliseconds) / 1000)
    }

    /// Milliseconds read from a client (a cursor): nil outside `WireLimits.acceptedDates`, where
    /// the backplane never issues one.
    init?(acceptedMilliseconds milliseconds: Int64) {
        self.init(millisecondsSince1970: milliseconds)
        guard WireLimits.acceptedDates.contains(self) else { return nil }
    }
}

enum OpaqueCursor {
    /// Text to a cursor: base64url, unpadded.
    static func encode(_ text: String) -> String { Base64URL.encode(Data(text.utf8)) }

    /// base64url (unpadded) to text; nil for anything else.
    static func decode(_ cursor: String) -> String? {
        Base64URL.decode(cursor).flatMap { String(data: $0, encoding: .utf8) }
    }

    /// The answer to a cursor the server did not issue (or one out of range).
    static var notIssued: ServiceError { .badRequest("'cursor' is not a cursor this server issued.") }
}

/// Opaque change-log cursor: the last sequence number of the application's change log delivered
/// (`c2:`). Cursors issued before migration v6 (`c1:`) held a number shared by all applications;
/// they stay valid and are translated by the store.
enum ChangeCursor {
    enum Position: Equatable {
        case seq(Int64)
        case legacy(Int64)
    }

    static func encode(_ seq: Int64) -> String { OpaqueCursor.encode("c2:\(seq)") }

    static func decode(_ cursor: String) throws -> Position {
        guard let text = OpaqueCursor.decode(cursor), let seq = Int64(text.dropFirst(3)), seq >= 0 else {
            throw OpaqueCursor.notIssued
        }
        switch text.prefix(3) {
        case "c2:": return .seq(seq)
        case "c1:": return .legacy(seq)
        default: throw OpaqueCursor.notIssued
        }
    }
}

/// Opaque position in the "episodes since" listing.
enum EpisodeCursor {
    static func encode(_ key: EpisodeKey) -> String {
        let json = (try? JSONEncoder().encode([String(key.updatedAt.millisecondsSince1970), key.feedId, key.assetId])) ?? Data()
        return OpaqueCursor.encode("e1:" + String(decoding: json, as: UTF8.self))
    }

    static func decode(_ cursor: String) throws -> EpisodeKey {
        guard let text = OpaqueCursor.decode(cursor), text.hasPrefix("e1:"),
              let parts = try? JSONDecoder().decode([String].self, from: Data(text.dropFirst(3).utf8)), parts.count == 3,
              let updatedAt = Int64(parts[0]).flatMap(Date.init(acceptedMilliseconds:))
        else { throw OpaqueCursor.notIssued }
        return EpisodeKey(updatedAt: updatedAt, feedId: parts[1], assetId: parts[2])
    }
}

/// An opaque admin pagination cursor: the last row's store id behind a kind prefix,
/// base64url-encoded. The prefix keeps one list's cursor from being taken by another.
struct RowIdCursor {
    let prefix: String

    func encode(_ rowId: Int64) -> String {
        OpaqueCursor.encode("\(prefix)\(rowId)")
    }

    func decode(_ cursor: String) throws -> Int64 {
        guard let text = OpaqueCursor.decode(cursor), text.hasPrefix(prefix), let rowId = Int64(text.dropFirst(prefix.count)), rowId >= 0
        else { throw OpaqueCursor.notIssued }
        return rowId
    }
}

extension RowIdCursor {
    /// The admin device list's cursor.
    static let device = RowIdCursor(prefix: "d1:")
    /// The download grant list's cursor: the last grant's row id (the list goes newest first).
    static let grant = RowIdCursor(prefix: "g1:")
    /// The application's command list: the last command's row id (the list goes newest first).
    static let command = RowIdCursor(prefix: "k1:")
}

/// The reporting API's opaque cursor: the last event's corrected time (ms) and row id.
enum EventCursor {
    static func encode(_ key: EventKey) -> String {
        OpaqueCursor.encode("ev1:\(key.correctedTime.millisecondsSince1970):\(key.rowId)")
    }

    static func decode(_ cursor: String) throws -> EventKey {
        let parts = OpaqueCursor.decode(cursor)?.split(separator: ":") ?? []
        guard parts.count == 3, parts[0] == "ev1", let correctedTime = Int64(parts[1]).flatMap(Date.init(acceptedMilliseconds:)),
              let rowId = Int64(parts[2]), rowId >= 0
        else { throw OpaqueCursor.notIssued }
        return EventKey(correctedTime: correctedTime, rowId: rowId)
    }
}
