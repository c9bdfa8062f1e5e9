import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import BackplaneWire

/// Where the command queue says that devices have new commands (`CommandService.enqueue`).
public protocol CommandPushes: Sendable {
    /// Returns at once: whatever is pushed is pushed in the background. `devices` are the
    /// targets as the enqueue read them, their commands just inserted, pending.
    func commandsEnqueued(applicationId: String, devices: [DeviceRecord])
}

/// Wakes, through APNs or FCM, devices that have a command waiting and no channel open on any
/// node: a lost phone whose app is not running is wiped when the push wakes it.
///
/// A push is a wake-up, not the truth: it carries no command, and the woken device syncs and
/// reads the queue. So a device is pushed only if, once the other nodes had `answerWindow` to
/// say they hold its channel, it has none, still has a pending command, a token and credentials
/// for its provider; and at most once per `spacing` (a claim in the store, which every node
/// sees). A command enqueued within that spacing is looked at again when it ends, and pushed
/// then if still waiting. Pushes the provider answers with 429 or 5xx are retried with backoff
/// and jitter a bounded number of times. Nothing here blocks the request that enqueued.
///
/// What waits is kept in memory: a node that stops loses its waiting pushes, and those devices
/// read their commands at their next interval sync, as before pushes existed.
public final class PushDispatcher: CommandPushes, Service {
    private let store: any BackplaneStore
    private let presence: any ChannelPresence
    private let wakeUps: any WakeUpPublisher
    private let options: PushOptions
    private let metrics: BackplaneMetrics
    private let logger: Logger
    private let now: @Sendable () -> Date
    private let apns: APNsSender
    private let fcm: FCMSender
    private let jobs: AsyncStream<Job>
    private let submit: AsyncStream<Job>.Continuation
    /// Devices whose look again at the end of the spacing is scheduled: one each.
    private let deferred = Mutex<Set<DeviceKey>>([])
    /// Credentials a provider refused, known here at once: the pushes already under way for
    /// them stop before sending, without waiting for the store's mark to be read again.
    private let refused = Mutex<Set<RefusedKey>>([])
    private let slots: PushSlots
    /// Pushes worked on at once by a node.
    static let concurrentPushes = 128
    /// Each application's credentials as last read, for a moment (every job reads them).
    private let credentials = Mutex<[String: (readAt: ContinuousClock.Instant, records: [PushCredentialsRecord])]>([:])
    static let credentialsMemory: Duration = .seconds(2)

    private struct Job: Sendable {
        var applicationId: String
        var deviceIds: [String]
        /// When the wake-up that asked the other nodes went out.
        var wokenAt: ContinuousClock.Instant
        /// A look again at the end of the spacing: wake the device first, at this time.
        var lookAgainAt: ContinuousClock.Instant? = nil
        /// The devices as the enqueue read them, a moment ago, with a command pending: a fresh
        /// job's pushes need no read of their own. Nil for a look again, which reads each.
        var known: [String: DeviceRecord]? = nil
    }

    private struct DeviceKey: Hashable {
        var applicationId: String
        var deviceId: String
    }

    private struct RefusedKey: Hashable {
        var applicationId: String
        var provider: PushProvider
        var setAt: Date

        init(_ record: PushCredentialsRecord) {
            (applicationId, provider, setAt) = (record.applicationId, record.provider, record.setAt)
        }
    }

    public init(
        store: any BackplaneStore, presence: any ChannelPresence, wakeUps: any WakeUpPublisher, options: PushOptions = PushOptions(),
        metrics: BackplaneMetrics = .none, logger: Logger = Logger(label: "backplane.push"), now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.store = store
        self.presence = presence
        self.wakeUps = wakeUps
        self.options = options
        self.metrics = metrics
        self.logger = logger
        self.now = now
        self.apns = APNsSender(options: options, now: now)
        self.fcm = FCMSender(options: options, now: now)
        (jobs, submit) = AsyncStream.makeStream(of: Job.self)
        slots = PushSlots(Self.concurrentPushes)
    }

    public func commandsEnqueued(applicationId: String, devices: [DeviceRecord]) {
        submit.yield(Job(
            applicationId: applicationId, deviceIds: devices.map(\.deviceId), wokenAt: .now,
            known: Dictionary(devices.map { ($0.deviceId, $0) }, uniquingKeysWith: { first, _ in first })))
    }

    /// Forgets this node's copy of the application's credentials (they changed here).
    public func credentialsChanged(applicationId: String) {
        credentials.withLock { _ = $0.removeValue(forKey: applicationId) }
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                for await job in self.jobs {
                    group.addTask { await self.handle(job) }
                }
            }
        }
        submit.finish()
        await apns.shutdown()
        await fcm.shutdown()
    }

    private func handle(_ job: Job) async {
        var job = job
        if let lookAgainAt = job.lookAgainAt {
            try? await Task.sleep(until: lookAgainAt, clock: .continuous)
            for deviceId in job.deviceIds { deferred.withLock { _ = $0.remove(DeviceKey(applicationId: job.applicationId, deviceId: deviceId)) } }
            guard !Task.isCancelled else { return }
            wakeUps.publish(.devices(applicationId: job.applicationId, deviceIds: job.deviceIds))
            job.wokenAt = .now
        }
        // The other nodes' answers to the wake-up (none to wait for with one node).
        try? await Task.sleep(until: job.wokenAt + presence.answerWindow, clock: .continuous)
        guard !Task.isCancelled else { return }
        let records: [PushCredentialsRecord]
        do {
            records = try await credentials(of: job.applicationId)
        } catch {
            logger.warning("Could not read push credentials; not pushing", metadata: ["applicationId": "\(job.applicationId)", "error": "\(error)"])
            return
        }
        // The common case by far: an application that set none pushes nothing.
        guard !records.isEmpty else { return }
        let woken = job
        await withDiscardingTaskGroup { group in
            for deviceId in woken.deviceIds {
                group.addTask { await self.push(deviceId, of: woken, records: records) }
            }
        }
    }

    private func push(_ deviceId: String, of job: Job, records: [PushCredentialsRecord]) async {
        let applicationId = job.applicationId
        guard !presence.channelOpen(applicationId: applicationId, deviceId: deviceId, since: job.wokenAt) else { return }
        guard await slots.acquire() else { return }
        defer { slots.release() }
        do {
            let device: DeviceRecord
            if let known = job.known?[deviceId] {
                device = known
            } else {
                // A look again: is a command still waiting, and which token does the device hold now?
                guard let (read, open) = try await store.deviceWithOpenCommands(applicationId: applicationId, deviceId: deviceId),
                    open.contains(where: { $0.state == .pending })
                else { return }
                device = read
            }
            guard device.isRegistered, let token = device.pushToken,
                let provider = device.pushProvider ?? PushProvider.assumed(forPlatform: device.platform),
                let record = records.first(where: { $0.provider == provider })
            else { return }
            guard record.brokenAt == nil, !isRefused(record) else {
                metrics.count(.credentialsBroken, provider: provider)
                return
            }
            switch try await store.claimPush(applicationId: applicationId, deviceId: deviceId, now: now(), spacing: options.spacing) {
            case .granted:
                await send(PushTarget(applicationId: applicationId, deviceId: deviceId, token: token, credentials: record), provider: provider)
            case .refused(let lastPushAt):
                lookAgain(DeviceKey(applicationId: applicationId, deviceId: deviceId), after: lastPushAt)
            }
        } catch {
            logger.warning("Could not push a device", metadata: ["applicationId": "\(applicationId)", "deviceId": "\(deviceId)", "error": "\(error)"])
        }
    }

    /// The device was pushed less than `spacing` ago: once the spacing ends, wake it again (its
    /// channel may be open by then, on any node) and push it if its command still waits.
    private func lookAgain(_ key: DeviceKey, after lastPushAt: Date) {
        guard deferred.withLock({ $0.insert(key).inserted }) else { return }
        let spacingEnds = lastPushAt.addingTimeInterval(Double(options.spacing.wholeMilliseconds) / 1000)
        // Bounded: the time is the store's, and a clock set back must not park a device for long.
        let wait = max(0, min(spacingEnds.timeIntervalSince(now()), Double(options.spacing.wholeMilliseconds) / 1000))
        submit.yield(Job(
            applicationId: key.applicationId, deviceIds: [key.deviceId], wokenAt: .now,
            lookAgainAt: .now + .milliseconds(Int64(wait * 1000) + 1)))
    }

    private func send(_ target: PushTarget, provider: PushProvider) async {
        var attempt = 1
        while true {
            let measure: (Duration) -> Void = { [metrics] in metrics.pushRequest(provider, took: $0) }
            let result = switch provider {
            case .apns: await apns.send(target, measure: measure)
            case .fcm: await fcm.send(target, measure: measure)
            default: PushResult.failed(reason: "no sender for provider '\(provider)'")
            }
            let metadata: Logger.Metadata = [
                "applicationId": "\(target.applicationId)", "deviceId": "\(target.deviceId)", "provider": "\(provider.rawValue)",
            ]
            switch result {
            case .delivered:
                metrics.count(.delivered, provider: provider)
                return
            case .retry where isRefused(target.credentials):
                metrics.count(.credentialsBroken, provider: provider)
                return
            case .retry(let reason, let after) where attempt < options.maxAttempts:
                metrics.pushRetried(provider)
                attempt += 1
                logger.debug("Push to retry", metadata: metadata.merging(["reason": "\(reason)"]) { $1 })
                try? await Task.sleep(for: after.map { min($0, .seconds(30)) } ?? backoff(attempt))
                if Task.isCancelled { return }
            case .retry(let reason, _), .failed(let reason):
                metrics.count(.failed, provider: provider)
                logger.warning("Push failed", metadata: metadata.merging(["reason": "\(reason)", "attempts": "\(attempt)"]) { $1 })
                return
            case .tokenRejected(let reason):
                metrics.count(.tokenDropped, provider: provider)
                logger.info("Provider rejected a device's push token; dropping it", metadata: metadata.merging(["reason": "\(reason)"]) { $1 })
                await dropToken(target)
                return
            case .credentialsRefused(let reason):
                metrics.count(.credentialsBroken, provider: provider)
                await markBroken(target.credentials, reason: reason)
                return
            }
        }
    }

    /// The delay before attempt `attempt` (2 or more): doubling from the first, times 0.5 to 1.5.
    private func backoff(_ attempt: Int) -> Duration {
        let base = options.firstRetryDelay * (1 << min(attempt - 2, 10))
        return min(base * Double.random(in: 0.5..<1.5), .seconds(30))
    }

    /// Clears the token, unless the device sent a new one since it was read.
    private func dropToken(_ target: PushTarget) async {
        let now = now()
        do {
            _ = try await store.updateDevice(applicationId: target.applicationId, deviceId: target.deviceId) { device, _ in
                guard device.pushToken == target.token else { return DeviceChange(device) }
                var device = device
                device.pushToken = nil
                device.pushProvider = nil
                device.updatedAt = now
                return DeviceChange(device)
            }
        } catch {
            logger.warning("Could not drop a dead push token", metadata: ["deviceId": "\(target.deviceId)", "error": "\(error)"])
        }
    }

    private func isRefused(_ record: PushCredentialsRecord) -> Bool {
        refused.withLock { $0.contains(RefusedKey(record)) }
    }

    private func markBroken(_ record: PushCredentialsRecord, reason: String) async {
        refused.withLock { _ = $0.insert(RefusedKey(record)) }
        do {
            let marked = try await store.markPushCredentialsBroken(
                applicationId: record.applicationId, provider: record.provider, setAt: record.setAt,
                broken: PushCredentialsBroken(since: now(), reason: reason))
            credentialsChanged(applicationId: record.applicationId)
            if marked {
                metrics.pushCredentialsMarkedBroken(record.provider)
                logger.error(
                    "The provider refused the application's push credentials; no push goes out with them until an admin sets new ones",
                    metadata: ["applicationId": "\(record.applicationId)", "provider": "\(record.provider.rawValue)", "reason": "\(reason)"])
            }
        } catch {
            logger.warning("Could not mark push credentials broken", metadata: ["error": "\(error)"])
        }
    }

    private func credentials(of applicationId: String) async throws -> [PushCredentialsRecord] {
        let now = ContinuousClock.now
        if let kept = credentials.withLock({ $0[applicationId] }), now - kept.readAt < Self.credentialsMemory { return kept.records }
        let records = try await store.pushCredentials(applicationId: applicationId)
        credentials.withLock { $0[applicationId] = (now, records) }
        return records
    }
}
