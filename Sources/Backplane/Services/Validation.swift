import Foundation
import BackplaneWire

/// Input checks shared by the services. Each throws `validation_failed` naming the field.
enum Validate {
    /// Required identifier: 1...maxIdentifierLength UTF-8 bytes, no control characters, not only spaces.
    static func identifier(_ value: String, field: String) throws {
        try text(value, field: field, maxLength: WireLimits.maxIdentifierLength)
    }

    static func text(_ value: String, field: String, maxLength: Int) throws {
        guard !value.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw ServiceError.validation("'\(field)' must not be empty.", field: field)
        }
        try optionalText(value, field: field, maxLength: maxLength)
    }

    /// Optional text: may be empty (meaning "clear" where documented), bounded, no control characters.
    /// Every text limit counts UTF-8 bytes (`WireLimits`), on the server and in the SDK alike.
    static func optionalText(_ value: String?, field: String, maxLength: Int) throws {
        guard let value else { return }
        guard value.utf8.count <= maxLength else {
            throw ServiceError.validation("'\(field)' is longer than \(maxLength) bytes (UTF-8).", field: field)
        }
        guard !value.unicodeScalars.contains(where: { CharacterSet.controlCharacters.contains($0) }) else {
            throw ServiceError.validation("'\(field)' must not contain control characters.", field: field)
        }
    }

    /// A date from outside: nil, or inside `WireLimits.acceptedDates` (what storage, cursors and
    /// date arithmetic are safe for).
    static func date(_ value: Date?, field: String) throws {
        guard let value, !WireLimits.acceptedDates.contains(value) else { return }
        throw ServiceError.validation(WireLimits.dateOutOfRangeMessage(field: field), field: field)
    }

    /// A page size from a `limit` query parameter: `default` when absent, else 1...max.
    static func pageLimit(_ limit: Int?, default defaultLimit: Int, max: Int) throws -> Int {
        let limit = limit ?? defaultLimit
        guard (1...max).contains(limit) else {
            throw ServiceError.validation("'limit' must be between 1 and \(max).", field: "limit")
        }
        return limit
    }

    /// A limit or duration setting: -1 (unlimited) or 0...Int32.max.
    static func setting(_ value: Int, field: String) throws {
        guard value >= ApplicationSettings.unlimited, value <= Int(Int32.max) else {
            throw ServiceError.validation("'\(field)' must be -1 (unlimited) or between 0 and \(Int32.max).", field: field)
        }
    }

    /// An asset's availability (an episode's, a policy's): each value in range, and a window
    /// that ends after it starts. `prefix` names the object in errors (`episodes[2].`).
    static func availability(_ availability: AssetAvailability, maxLifetimeDownloads: Int?, at prefix: String = "") throws {
        if let (field, message) = availability.problem(prefix: prefix) { throw ServiceError.validation(message, field: field) }
        if let value = maxLifetimeDownloads { try setting(value, field: "\(prefix)maxLifetimeDownloads") }
    }

    static func settings(_ settings: ApplicationSettings) throws {
        try setting(settings.deviceLimit, field: "deviceLimit")
        try setting(settings.expiryAfterDownloadSeconds, field: "expiryAfterDownloadSeconds")
        try setting(settings.expiryAfterPlaySeconds, field: "expiryAfterPlaySeconds")
        try setting(settings.offlineViewingPeriodSeconds, field: "offlineViewingPeriodSeconds")
        try setting(settings.maxDownloadsPerDevice, field: "maxDownloadsPerDevice")
        try setting(settings.maxDownloadsPerAccount, field: "maxDownloadsPerAccount")
        try setting(settings.maxLifetimeDownloadsPerAsset, field: "maxLifetimeDownloadsPerAsset")
        try setting(settings.maxCopiesPerAccount, field: "maxCopiesPerAccount")
    }
}
