@testable import Backplane
import Foundation
import BackplaneWire
import Testing

/// `SyncResponse.wireJSON()` writes the sync answer by hand; it must give exactly the bytes
/// `WireJSON.encoder()` gives, which the SDK and the signing of answers rely on.
@Suite struct SyncResponseJSONTests {
    /// Strings that need each kind of escape, and text outside ASCII.
    static let awkwardStrings = [
        "", "plain", "quote \" and backslash \\", "a/slash", "</script>", "\u{08}\u{0C}\n\r\t", "\u{00}\u{01}\u{1F}\u{7F}",
        "é", "e\u{301}", "日本語", "🎬👨‍👩‍👧", "\u{2028}\u{2029}", "\u{FEFF}bom", "-5", "true", "null",
    ]

    static let dates = [
        Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1_795_000_000.999), Date(timeIntervalSince1970: -86_400.5),
        Date(timeIntervalSince1970: 253_402_300_799), Date(timeIntervalSince1970: 1_700_000_000.000_4),
    ]

    /// A device with every optional field set, so that a field added later shows up here.
    static func fullDevice(_ text: String, _ date: Date) -> Device {
        Device(
            deviceId: "d-" + text, userId: "u-" + text, externalDeviceId: "x" + text, nickname: text, platform: "p" + text,
            model: text + "m", osVersion: text + "os", sdkVersion: text + "sdk", appVersion: text + "app", pushToken: text + "push", pushProvider: .fcm,
            downloadEnabled: true, registeredAt: date, updatedAt: date.addingTimeInterval(1), lastSeenAt: date.addingTimeInterval(2),
            unregisteredAt: date.addingTimeInterval(3))
    }

    static let settings = ApplicationSettings(
        deviceLimit: 0, expiryAfterDownloadSeconds: -1, expiryAfterPlaySeconds: 86_400, offlineViewingPeriodSeconds: Int.max,
        maxDownloadsPerDevice: Int.min, maxDownloadsPerAccount: 7, maxLifetimeDownloadsPerAsset: 12_345, maxCopiesPerAccount: 1)

    private func expectSameBytes(_ response: SyncResponse, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let expected = try WireJSON.encoder().encode(response)
        let written = try response.wireJSON()
        // Bytes, not strings: String equality would take "é" and "e\u{301}" for the same.
        #expect(written == Array(expected), "\(String(decoding: written, as: UTF8.self))", sourceLocation: sourceLocation)
    }

    @Test func everyFieldAndEscapeMatchesJSONEncoder() throws {
        for (index, text) in Self.awkwardStrings.enumerated() {
            let date = Self.dates[index % Self.dates.count]
            try expectSameBytes(SyncResponse(device: Self.fullDevice(text, date), settings: Self.settings, serverTime: date))
        }
        // Every optional left out, and the documented defaults.
        let bare = Device(
            deviceId: "phone", userId: "alice", platform: "linux", downloadEnabled: false,
            registeredAt: Self.dates[1], updatedAt: Self.dates[1], lastSeenAt: Self.dates[1])
        try expectSameBytes(SyncResponse(device: bare, settings: .defaults, serverTime: Self.dates[0]))
    }

    /// A command with every optional field set, so that a field added later shows up here.
    static func fullCommand(_ text: String, _ date: Date, type: CommandType = .deleteAssets, state: CommandState = .failed) -> Command {
        Command(
            commandId: "c-" + text, deviceId: "d-" + text, type: type, assetIds: [text, "a/1", ""], state: state, createdAt: date,
            expiresAt: date.addingTimeInterval(1), deliveredAt: date.addingTimeInterval(2), completedAt: date.addingTimeInterval(3),
            failureReason: text, deferrals: 3)
    }

    /// Commands and acknowledgement results are written by hand too; download report results go
    /// through `JSONEncoder`, and the object around them must still be the same.
    @Test func answersWithCommandsAndResultsMatchJSONEncoder() throws {
        for (index, text) in Self.awkwardStrings.enumerated() {
            let date = Self.dates[index % Self.dates.count]
            let commands = [
                Self.fullCommand(text, date, type: CommandType.allCases[index % CommandType.allCases.count],
                                 state: CommandState.allCases[index % CommandState.allCases.count]),
                Command(commandId: "c2", deviceId: "phone", type: .wipe, state: .pending, createdAt: date),
                Command(commandId: "c3", deviceId: "phone", type: .deleteAssets, assetIds: [], state: .delivered, createdAt: date, deferrals: -1),
            ]
            let results = [
                CommandAckResult(commandId: "c0" + text, status: .duplicate, message: text),
                CommandAckResult(commandId: "c1", status: .accepted),
                CommandAckResult(commandId: "c9", status: .rejected, message: "No such command for this device."),
            ]
            try expectSameBytes(SyncResponse(
                device: Self.fullDevice("x", date), settings: .defaults, serverTime: date, commands: commands, ackResults: results,
                downloadReportResults: [DownloadReportResult(grantId: "g1", status: .accepted, state: .completed, message: text)],
                licenseRenewals: [
                    LicenseRenewal(licenseId: "l1" + text, status: .renewed, expiresAt: date),
                    LicenseRenewal(licenseId: "l2", status: .ended, reason: .grantEnded),
                ]))
            try expectSameBytes(SyncResponse(
                device: Self.fullDevice(text, date), settings: .defaults, serverTime: date, commands: [commands[index % 3]],
                ackResults: [results[index % 3]]))
        }
    }

    /// The samples set every field: a field added to `Device`, `ApplicationSettings`, `Command`,
    /// `CommandAckResult` or `SyncResponse` without a value here fails, and once set here,
    /// `wireJSON()` must write it.
    @Test func theSamplesSetEveryField() throws {
        let response = SyncResponse(
            device: Self.fullDevice("x", Self.dates[1]), settings: Self.settings, serverTime: Self.dates[1],
            commands: [Self.fullCommand("x", Self.dates[1])], ackResults: [CommandAckResult(commandId: "c", status: .accepted, message: "m")],
            licenseRenewals: [])
        for value in [response.device as Any, response.settings, response, response.commands[0], response.ackResults[0]] {
            for child in Mirror(reflecting: value).children {
                if let optional = child.value as? OptionalField {
                    #expect(!optional.isNil, "\(type(of: value)).\(child.label ?? "?") is not set in the sample")
                }
            }
        }
        let object = try #require(try JSONSerialization.jsonObject(with: Data(response.wireJSON())) as? [String: Any])
        #expect(object.count == Mirror(reflecting: response).children.count)
        #expect((object["device"] as? [String: Any])?.count == Mirror(reflecting: response.device).children.count)
        #expect((object["settings"] as? [String: Any])?.count == Mirror(reflecting: response.settings).children.count)
        #expect(((object["commands"] as? [Any])?.first as? [String: Any])?.count == Mirror(reflecting: response.commands[0]).children.count)
        #expect(((object["ackResults"] as? [Any])?.first as? [String: Any])?.count == Mirror(reflecting: response.ackResults[0]).children.count)
    }
}

private protocol OptionalField { var isNil: Bool { get } }
extension Optional: OptionalField { var isNil: Bool { self == nil } }
