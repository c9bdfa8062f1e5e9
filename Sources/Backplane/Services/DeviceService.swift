import Foundation
import BackplaneWire

/// The per-user limit on download-enabled devices. `-1` is unlimited.
struct DeviceLimitPolicy: Sendable {
    let limit: Int

    init(_ settings: ApplicationSettings) {
        self.limit = settings.deviceLimit
    }

    /// Whether one more device of the user may be download-enabled.
    func hasRoom(otherEnabled: Int) -> Bool {
        limit < 0 || otherEnabled < limit
    }

    func checkEnable(otherEnabled: Int) throws {
        guard hasRoom(otherEnabled: otherEnabled) else {
            throw ServiceError.deviceLimitReached(enabled: otherEnabled, limit: limit)
        }
    }
}

/// Registration, the device's own requests, and the admin's view of devices.
public struct DeviceService: Sendable {
    public let store: any BackplaneStore
    let wakeUps: any WakeUpPublisher
    /// Answers show a device's last-seen time as noted, before it is written.
    let lastSeen: LastSeenLog
    let metrics: BackplaneMetrics
    let now: @Sendable () -> Date

    /// Who asked for a change: a change the device did not make itself wakes it up.
    public enum Origin: Sendable {
        case device, admin
    }

    public init(
        store: any BackplaneStore, wakeUps: any WakeUpPublisher, lastSeen: LastSeenLog, metrics: BackplaneMetrics = .none,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.store = store
        self.wakeUps = wakeUps
        self.lastSeen = lastSeen
        self.metrics = metrics
        self.now = now
    }

    struct RegistrationDecision: Sendable {
        var outcome: RegistrationOutcome
        var deviceLimitReached: Bool
    }

    /// Registers a device idempotently and issues a new device credential.
    ///
    /// A device id that has a row already (registered or not) is taken only by a request that
    /// `proof` shows comes from that install; anything else is 409 `device_already_registered`
    /// and changes nothing. Then:
    /// - same device id, same user: the same device (`existing`), its download flag unchanged;
    /// - registered to another user: 409 `device_already_registered`, unless `moveFromOtherUser`,
    ///   which moves it (`moved`) and so frees its slot in the old user's limit;
    /// - unregistered earlier: registered again (`reactivated`);
    /// - new: `created`. Moved, reactivated and created devices are download-enabled while the user
    ///   is under the device limit, else registered with download disabled and `deviceLimitReached`.
    ///
    /// `userToken` is what the request's user token proved (`UserIdentityService.check`): where
    /// one is required and none was sent, only `existing` is allowed (the install proves it is a
    /// device already bound to this user); anything that would bind the device to the user anew
    /// is 401 `user_token_required`.
    public func register(
        applicationId: String, _ request: RegisterDeviceRequest, proof: RegistrationProof,
        userToken: UserIdentityService.Verdict = .notRequired
    ) async throws -> RegisterDeviceResponse {
        try Validate.identifier(request.userId, field: "userId")
        try Validate.identifier(request.deviceId, field: "deviceId")
        try Validate.text(request.platform, field: "platform", maxLength: WireLimits.maxShortTextLength)
        try validateProfile(externalDeviceId: request.externalDeviceId, nickname: request.nickname, pushToken: request.pushToken)
        try Validate.optionalText(request.model, field: "model", maxLength: WireLimits.maxShortTextLength)
        try Validate.optionalText(request.osVersion, field: "osVersion", maxLength: WireLimits.maxShortTextLength)
        try Validate.optionalText(request.sdkVersion, field: "sdkVersion", maxLength: WireLimits.maxShortTextLength)
        try Validate.optionalText(request.appVersion, field: "appVersion", maxLength: WireLimits.maxShortTextLength)
        if let keyText = request.devicePublicKey {
            guard let key = RegistrationProof.publicKey(keyText) else {
                throw ServiceError.validation(
                    "'devicePublicKey' must be a P-256 public key: base64url of its 65-byte uncompressed X9.63 form.", field: "devicePublicKey")
            }
            // Only the holder of the private key may record it.
            guard proof.isSigned(by: key) else {
                throw ServiceError.invalidSignature(
                    "A registration with 'devicePublicKey' must carry \(RequestSigning.Header.deviceProof): the device key's signature of the string to sign.")
            }
        }

        let credential = Secrets.deviceCredential()
        let credentialHash = Secrets.hash(credential)
        let now = now()
        let (device, decision) = try await store.registerDevice(
            applicationId: applicationId, deviceId: request.deviceId, userId: request.userId
        ) { state in
            let policy = DeviceLimitPolicy(state.limit.settings)
            let hasRoom = policy.hasRoom(otherEnabled: state.limit.otherEnabledDevices)
            let outcome: RegistrationOutcome
            var device: DeviceRecord
            if let existing = state.existing {
                guard proof.proves(existing) else {
                    throw ServiceError(.deviceAlreadyRegistered,
                        "Device '\(request.deviceId)' is already registered. Registering it again needs proof that this is that install: "
                            + "\(RequestSigning.Header.deviceProof) signed by the device key it registered with"
                            + (existing.publicKey == nil ? ", or its current \(RequestSigning.Header.deviceCredential)" : "")
                            + ". An admin can release the device id.",
                        details: ["deviceId": .string(request.deviceId), "proofRequired": .bool(true)])
                }
                device = existing
                if !existing.isRegistered {
                    outcome = .reactivated
                } else if existing.userId == request.userId {
                    outcome = .existing
                } else if request.moveFromOtherUser == true {
                    outcome = .moved
                } else {
                    throw ServiceError(.deviceAlreadyRegistered,
                        "Device '\(request.deviceId)' is registered to another user; set moveFromOtherUser to move it.",
                        details: ["deviceId": .string(request.deviceId)])
                }
                if outcome != .existing {
                    try Self.checkUserToken(userToken, userId: request.userId)
                    try Self.checkRoomForAnotherDevice(state.limit, userId: request.userId)
                    device.userId = request.userId
                    device.downloadEnabled = hasRoom
                    device.unregisteredAt = nil
                }
            } else {
                try Self.checkUserToken(userToken, userId: request.userId)
                try Self.checkRoomForAnotherDevice(state.limit, userId: request.userId)
                outcome = .created
                device = DeviceRecord(
                    applicationId: applicationId, deviceId: request.deviceId, userId: request.userId,
                    platform: request.platform, downloadEnabled: hasRoom, credentialHash: credentialHash,
                    registeredAt: now, updatedAt: now, lastSeenAt: now)
            }
            device.platform = request.platform
            device.externalDeviceId = request.externalDeviceId.map(Self.emptyAsNil) ?? device.externalDeviceId
            device.nickname = request.nickname.map(Self.emptyAsNil) ?? device.nickname
            device.pushToken = request.pushToken.map(Self.emptyAsNil) ?? device.pushToken
            device.pushProvider = device.pushToken == nil ? nil : request.pushProvider ?? device.pushProvider
            device.model = request.model ?? device.model
            device.osVersion = request.osVersion ?? device.osVersion
            device.sdkVersion = request.sdkVersion ?? device.sdkVersion
            device.appVersion = request.appVersion ?? device.appVersion
            device.credentialHash = credentialHash
            // A device registered before it had a key, or released, records the one it proved.
            device.publicKey = device.publicKey ?? request.devicePublicKey
            device.updatedAt = now
            device.lastSeenAt = now
            let limitReached = !device.downloadEnabled && !hasRoom
            // A device that goes to another user (moved, or reactivated by another) takes none
            // of the old user's downloads along.
            let changesUser = state.existing.map { $0.userId != request.userId } ?? false
            return (DeviceChange(device, releasing: changesUser ? .all : nil),
                    RegistrationDecision(outcome: outcome, deviceLimitReached: limitReached))
        }
        metrics.registrations.increment()
        if decision.deviceLimitReached { metrics.deviceLimitRefusals.increment() }
        return RegisterDeviceResponse(
            device: device.wire(includePushToken: true), outcome: decision.outcome,
            alreadyRegistered: decision.outcome == .existing, deviceLimitReached: decision.deviceLimitReached,
            deviceCredential: credential, settings: try await settings(applicationId), serverTime: now)
    }

    /// Checks a device credential; the answer is the device with its open commands, as read,
    /// when it may make requests.
    func authenticate(applicationId: String, deviceId: String, credential: String) async throws -> (DeviceRecord, [CommandRecord]) {
        guard let (device, openCommands) = try await store.deviceWithOpenCommands(applicationId: applicationId, deviceId: deviceId),
              device.credentialHash == Secrets.hash(credential)
        else { throw ServiceError.invalidCredentials("Unknown device or wrong device credential.") }
        guard device.isRegistered else {
            throw ServiceError(.deviceUnregistered, "Device '\(deviceId)' was unregistered; register it again.")
        }
        return (device, openCommands)
    }

    // MARK: a device's own requests

    public func device(applicationId: String, deviceId: String) async throws -> DeviceResponse {
        try await response(applicationId, try await existing(applicationId, deviceId), includePushToken: true)
    }

    /// The registered devices of the device's user. Push tokens of the other devices are left out.
    public func userDevices(applicationId: String, deviceId: String) async throws -> UserDevicesResponse {
        let me = try await existing(applicationId, deviceId)
        let devices = try await store.devices(applicationId: applicationId, userId: me.userId)
        return UserDevicesResponse(
            devices: devices.map { lastSeen.latest($0).wire(includePushToken: $0.deviceId == deviceId) },
            downloadEnabledCount: devices.filter(\.downloadEnabled).count,
            settings: try await settings(applicationId), serverTime: now())
    }

    /// Sets the fields present in `update`; an empty string clears one.
    public func updateProfile(applicationId: String, deviceId: String, _ update: DeviceProfileUpdate) async throws -> DeviceResponse {
        try validateProfile(externalDeviceId: update.externalDeviceId, nickname: update.nickname, pushToken: update.pushToken)
        let now = now()
        let device = try await mutate(applicationId, deviceId) { original, _ in
            var device = original
            if let value = update.nickname { device.nickname = Self.emptyAsNil(value) }
            if let value = update.externalDeviceId { device.externalDeviceId = Self.emptyAsNil(value) }
            if let value = update.pushToken { device.pushToken = Self.emptyAsNil(value) }
            if let value = update.pushProvider { device.pushProvider = value }
            // A cleared token takes its provider with it: the next token may be another's.
            if device.pushToken == nil { device.pushProvider = nil }
            if device != original { device.updatedAt = now }
            return DeviceChange(device)
        }
        return try await response(applicationId, device, includePushToken: true)
    }

    /// Turns download on or off. Turning it on above the user's device limit is a 409
    /// `device_limit_reached`, for devices and admins alike.
    public func setDownloadEnabled(
        applicationId: String, deviceId: String, enabled: Bool, origin: Origin
    ) async throws -> DeviceResponse {
        let now = now()
        let change = { @Sendable (device: DeviceRecord, limit: DeviceLimitState) throws -> DeviceChange in
            guard device.isRegistered else {
                throw ServiceError.conflict("Device '\(deviceId)' is unregistered; it must register again first.")
            }
            guard device.downloadEnabled != enabled else { return DeviceChange(device) }
            if enabled {
                try DeviceLimitPolicy(limit.settings).checkEnable(otherEnabled: limit.otherEnabledDevices)
            }
            var device = device
            device.downloadEnabled = enabled
            device.updatedAt = now
            return DeviceChange(device)
        }
        let device: DeviceRecord
        do {
            device = try await mutate(applicationId, deviceId, change)
        } catch let refusal as ServiceError where refusal.code == .deviceLimitReached {
            metrics.deviceLimitRefusals.increment()
            throw refusal
        }
        if origin == .admin { wakeUps.publish(.devices(applicationId: applicationId, deviceIds: [deviceId])) }
        return try await response(applicationId, device, includePushToken: true)
    }

    /// A device turns download off for another device of its user: the vendor's way to free a
    /// slot from the phone in hand when the user is at the device limit and the old tablet is in
    /// a drawer. Never on (403: a device enables only itself, within the limit); a device of
    /// another user, or an unknown one, is 404. The sibling is woken up to sync.
    public func setSiblingDownloadEnabled(
        applicationId: String, deviceId: String, siblingId: String, enabled: Bool
    ) async throws -> DeviceResponse {
        guard !enabled else {
            throw ServiceError.forbidden("A device may turn download off for another device of its user, never on; it enables only itself.")
        }
        let me = try await existing(applicationId, deviceId)
        let now = now()
        let sibling = try await mutate(applicationId, siblingId) { device, _ in
            guard device.userId == me.userId, device.isRegistered else { throw ServiceError.notFound("No device '\(siblingId)' of this user.") }
            guard device.downloadEnabled else { return DeviceChange(device) }
            var device = device
            device.downloadEnabled = false
            device.updatedAt = now
            return DeviceChange(device)
        }
        if siblingId != deviceId { wakeUps.publish(.devices(applicationId: applicationId, deviceIds: [siblingId])) }
        return try await response(applicationId, sibling, includePushToken: siblingId == deviceId)
    }

    /// Disables and detaches the device; the row stays for audit and is hidden from device lists.
    /// Unregistering an unregistered device changes nothing.
    public func unregister(applicationId: String, deviceId: String, origin: Origin) async throws -> DeviceResponse {
        let now = now()
        let device = try await mutate(applicationId, deviceId) { device, _ in Self.detached(device, at: now) }
        if origin == .admin { wakeUps.publish(.devices(applicationId: applicationId, deviceIds: [deviceId])) }
        return try await response(applicationId, device, includePushToken: true)
    }

    /// Lets another install register this device id: unregisters the device and forgets its key and
    /// credential, so the next registration of the id needs no proof. For a lost or reset device
    /// whose install can no longer prove itself.
    public func release(applicationId: String, deviceId: String) async throws -> DeviceResponse {
        let now = now()
        let device = try await mutate(applicationId, deviceId) { device, _ in
            var released = Self.detached(device, at: now)
            released.device.publicKey = nil
            released.device.credentialHash = ""
            released.device.updatedAt = now
            return released
        }
        wakeUps.publish(.devices(applicationId: applicationId, deviceIds: [deviceId]))
        return try await response(applicationId, device, includePushToken: true)
    }

    /// What unregistering does to a device: download off, detached (`unregisteredAt`), the row kept
    /// for audit, and every download grant released. An unregistered device is left as it is.
    static func detached(_ device: DeviceRecord, at now: Date) -> DeviceChange {
        guard device.isRegistered else { return DeviceChange(device) }
        var device = device
        device.downloadEnabled = false
        device.unregisteredAt = now
        device.updatedAt = now
        return DeviceChange(device, releasing: .all)
    }

    // MARK: admin

    /// The device's row with its newest last-seen time (the console's device page); 404 when unknown.
    func record(applicationId: String, deviceId: String) async throws -> DeviceRecord {
        lastSeen.latest(try await existing(applicationId, deviceId))
    }

    public func adminDevice(applicationId: String, deviceId: String) async throws -> DeviceResponse {
        try await response(applicationId, try await existing(applicationId, deviceId), includePushToken: true)
    }

    public func listDevices(applicationId: String, filter: DeviceFilter, cursor: String?, limit: Int?) async throws -> DevicePage {
        let limit = try Validate.pageLimit(limit, default: WireLimits.defaultPageSize, max: WireLimits.maxPageSize)
        try Validate.optionalText(filter.userId, field: "userId", maxLength: WireLimits.maxIdentifierLength)
        try Validate.optionalText(filter.externalDeviceId, field: "externalDeviceId", maxLength: WireLimits.maxIdentifierLength)
        let after = try cursor.map(RowIdCursor.device.decode)
        // One extra row tells whether another page exists.
        let rows = try await store.devices(applicationId: applicationId, filter: filter, afterRowId: after, limit: limit + 1)
        let page = rows.prefix(limit)
        let next = rows.count > limit ? page.last?.rowId.map(RowIdCursor.device.encode) : nil
        return DevicePage(devices: page.map { lastSeen.latest($0).wire(includePushToken: true) }, nextCursor: next)
    }

    // MARK: helpers

    private func validateProfile(externalDeviceId: String?, nickname: String?, pushToken: String?) throws {
        try Validate.optionalText(externalDeviceId, field: "externalDeviceId", maxLength: WireLimits.maxIdentifierLength)
        try Validate.optionalText(nickname, field: "nickname", maxLength: WireLimits.maxIdentifierLength)
        try Validate.optionalText(pushToken, field: "pushToken", maxLength: WireLimits.maxPushTokenLength)
    }

    private func existing(_ applicationId: String, _ deviceId: String) async throws -> DeviceRecord {
        guard let device = try await store.device(applicationId: applicationId, deviceId: deviceId) else {
            throw ServiceError.notFound("No device '\(deviceId)'.")
        }
        return device
    }

    private func mutate(
        _ applicationId: String, _ deviceId: String,
        _ change: @escaping @Sendable (DeviceRecord, DeviceLimitState) throws -> DeviceChange
    ) async throws -> DeviceRecord {
        guard let device = try await store.updateDevice(applicationId: applicationId, deviceId: deviceId, change) else {
            throw ServiceError.notFound("No device '\(deviceId)'.")
        }
        return device
    }

    private func settings(_ applicationId: String) async throws -> ApplicationSettings {
        guard let application = try await store.application(id: applicationId) else {
            throw ServiceError.notFound("No application with id '\(applicationId)'.")
        }
        return application.settings
    }

    func response(_ applicationId: String, _ device: DeviceRecord, includePushToken: Bool) async throws -> DeviceResponse {
        DeviceResponse(device: lastSeen.latest(device).wire(includePushToken: includePushToken), settings: try await settings(applicationId), serverTime: now())
    }

    private static func emptyAsNil(_ value: String) -> String? { value.isEmpty ? nil : value }
}

extension DeviceRecord {
    /// The device as the API shows it; the push token only to the device itself and admins.
    func wire(includePushToken: Bool) -> Device {
        var wire = device
        if !includePushToken { wire.pushToken = nil }
        return wire
    }
}
