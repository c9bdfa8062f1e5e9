import ArgumentParser
import ClientSDK
import Foundation

// What the harness prints: JSON on stdout, and the exit codes.

enum Output {
    static let encoder: JSONEncoder = {
        let encoder = WireJSON.encoder()
        encoder.outputFormatting.insert(.withoutEscapingSlashes)  // URLs stay readable in a terminal
        return encoder
    }()

    static func json(_ value: some Encodable) -> JSONValue {
        (try? JSONDecoder().decode(JSONValue.self, from: encoder.encode(value))) ?? .null
    }

    static func print(_ value: some Encodable) {
        line(value)
    }

    /// One JSON value on one line, flushed at once (watch output is read while it runs).
    static func line(_ value: some Encodable) {
        guard let data = try? encoder.encode(value) else { return }
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }

    static func exitCode(for error: BackplaneClientError) -> Int32 {
        switch (error.kind, error.code) {
        case (.server, .deviceLimitReached): 3
        case (.server, .invalidCredentials), (.server, .invalidSignature), (.server, .userTokenRequired), (.server, .userTokenInvalid),
             (.server, .userTokenMismatch), (.userToken, _): 4
        // The asset's origin, not the backplane: it must not read as "backplane unreachable".
        case (.download, _): 9
        case _ where error.isTransient: 5
        case (.server, .deviceAlreadyRegistered): 6
        case (.server, .deviceUnregistered), (.notRunning, _): 7
        case (.server, .notFound): 8
        default: 1
        }
    }

    static func fail(_ error: BackplaneClientError) -> Never {
        FileHandle.standardError.write(Data("backplane-harness: \(error)\n".utf8))
        exit(exitCode(for: error))
    }
}

struct ErrorOutput: Encodable {
    var kind: String
    var code: String?
    var status: Int?
    var message: String

    init(_ error: BackplaneClientError) {
        kind = error.kind.rawValue
        code = error.code?.rawValue
        status = error.status
        message = error.description
    }
}

struct StatusOutput: Encodable {
    var state: String
    var deviceId: String?
    var userId: String
    var isRegistered: Bool
    var downloadEnabled: Bool?
    var device: Device?
    var settings: ApplicationSettings?
    var lastSyncAt: Date?
    var clockOffsetSeconds: Double
    var lastError: ErrorOutput?

    init(_ status: BackplaneEngine.Status) {
        state = status.state.rawValue
        deviceId = status.deviceId
        userId = status.userId
        isRegistered = status.isRegistered
        downloadEnabled = status.device?.downloadEnabled
        device = status.device
        settings = status.settings
        lastSyncAt = status.lastSyncAt
        clockOffsetSeconds = status.clockOffset
        lastError = status.lastError.map(ErrorOutput.init)
    }
}

struct EventOutput: Encodable {
    var event: String
    var at = Date()
    var deviceId: String?
    var outcome: String?
    var downloadEnabled: Bool?
    var deviceLimit: Int?
    var enabledCount: Int?
    var settings: ApplicationSettings?
    var error: ErrorOutput?
    var assetIds: [String]?
    var reason: String?
    var connected: Bool?
    var feedId: String?
    var status: String?
    var summary: [String: Int]?
    var count: Int?
    var rejected: [EventResult]?
    var bytes: Int64?
    var expectedBytes: Int64?
    var fraction: Double?
    var failure: DownloadFailure?
    var willRetry: Bool?
    var message: String?

    init(_ event: SDKEvent) {
        self.event = event.name
        switch event {
        case .registered(let device, let outcome):
            deviceId = device.deviceId
            self.outcome = outcome.rawValue
            downloadEnabled = device.downloadEnabled
        case .deviceAlreadyRegistered(let id):
            deviceId = id
        case .deviceLimitReached(let limit, let count):
            deviceLimit = limit
            enabledCount = count
        case .invalidCredentials(let error), .communicationsFailure(let error):
            self.error = ErrorOutput(error)
        case .syncCompleted(let result):
            deviceId = result.device.deviceId
            downloadEnabled = result.device.downloadEnabled
        case .downloadEnabledChanged(let enabled):
            downloadEnabled = enabled
        case .settingsChanged(let settings):
            self.settings = settings
        case .remoteWipe(let deleted):
            assetIds = deleted
        case .assetsDeleted(let deleted, let reason):
            assetIds = deleted
            self.reason = reason.rawValue
        case .channelStateChanged(let connected):
            self.connected = connected
        case .assetAdded(let item), .assetDeferred(let item):
            assetIds = [item.assetId]
            feedId = item.feedId
        case .subscriptionAssetDeleted(let assetId, let feedId, let reason):
            assetIds = [assetId]
            self.feedId = feedId
            self.reason = reason.rawValue
        case .subscriptionStatusChanged(let status):
            self.status = status.rawValue
        case .subscriptionSyncFinished(let summary):
            self.summary = [
                "changes": summary.changes, "added": summary.added, "deferred": summary.deferred,
                "removed": summary.removed, "reset": summary.reset,
            ]
        case .logsSent(let count):
            self.count = count
        case .logsRejected(let results):
            rejected = results
        case .downloadQueued(let asset), .downloadCompleted(let asset):
            assetIds = [asset.assetId]
            bytes = asset.bytesDownloaded
            expectedBytes = asset.expectedBytes
        case .downloadStarted(let assetId):
            assetIds = [assetId]
        case .downloadProgress(let assetId, let bytes, let expectedBytes, let fraction):
            assetIds = [assetId]
            self.bytes = bytes
            self.expectedBytes = expectedBytes
            self.fraction = fraction
        case .downloadError(let assetId, let failure, let willRetry):
            assetIds = [assetId]
            self.failure = failure
            self.willRetry = willRetry
        case .downloadWarning(let assetId, let message):
            assetIds = [assetId]
            self.message = message
        case .downloadDenied(let assetId, let rule, _, let permanent):
            assetIds = [assetId]
            reason = rule.rawValue
            willRetry = !permanent
        case .downloadsBlocked(let block):
            reason = block.rawValue
        case .downloadRemoved(let assetId, let reason):
            assetIds = [assetId]
            self.reason = reason.rawValue
        case .downloadEngineStatusChanged(let status):
            self.status = status.name
            if case .downloading(let assetId) = status { assetIds = [assetId] }
            if case .blocked(let block) = status { reason = block.rawValue }
        case .assetExpired(let assetId, let reason):
            assetIds = [assetId]
            self.reason = reason.rawValue
        case .trustedTimeLost(let reason):
            self.reason = reason.rawValue
        case .playbackRefused(let assetId, let rights):
            assetIds = [assetId]
            self.reason = rights.name
        case .unregistered, .startingRemoteKill, .remoteKill, .downloadsUnblocked:
            break
        }
    }
}
