import Backplane
import ClientSDK
import Foundation
import Testing
import TestSupport

/// The app's license provider: acquired before the files come (with the backplane's
/// entitlement), renewed before it ends, released when the asset expires.
@Suite struct LicenseProviderTests {
    /// A provider that records its calls and answers as told.
    final class RecordingProvider: LicenseProvider, @unchecked Sendable {
        private let lock = NSLock()
        private var _acquired: [LicenseRequest] = []
        private var _renewed: [LicenseRequest] = []
        private var _released: [String] = []
        let fails: Bool
        let licenseEnd: Date?
        let onAcquire: @Sendable (String) -> Void

        init(fails: Bool = false, licenseEnd: Date? = nil, onAcquire: @escaping @Sendable (String) -> Void = { _ in }) {
            self.fails = fails
            self.licenseEnd = licenseEnd
            self.onAcquire = onAcquire
        }

        private func locked<T>(_ body: () -> T) -> T {
            lock.lock()
            defer { lock.unlock() }
            return body()
        }

        var acquired: [LicenseRequest] { locked { _acquired } }
        var renewed: [String] { locked { _renewed.map(\.assetId) } }
        var renewals: [LicenseRequest] { locked { _renewed } }
        var released: [String] { locked { _released } }

        struct Refused: Error {}

        func acquireLicense(for asset: LicenseRequest) async throws -> LicenseState {
            locked { _acquired.append(asset) }
            onAcquire(asset.assetId)
            if fails { throw Refused() }
            return .acquired(until: licenseEnd)
        }

        func renewLicense(for asset: LicenseRequest) async throws -> Date? {
            locked { _renewed.append(asset) }
            return licenseEnd?.addingTimeInterval(86_400 * 30)
        }

        func releaseLicense(assetId: String) async {
            locked { _released.append(assetId) }
        }
    }

    @Test func theLicenseIsAcquiredWithTheEntitlementBeforeAnyFileAndReleasedAtExpiry() async throws {
        let time = SimulatedTime()
        let server = try await InProcessBackplane.start(now: { time.now })
        _ = try await server.services.applications.updateSettings(
            applicationId: server.applicationId, ApplicationSettingsUpdate { $0.expiryAfterDownloadSeconds = 3 * 86_400 })
        let origin = try await TestOrigin.start()
        origin.serve("/film.mp4", TestOrigin.content(5_000))
        // The provider sees the origin untouched: the license comes first.
        let provider = RecordingProvider(licenseEnd: time.now.addingTimeInterval(2 * 86_400)) { [origin] assetId in
            #expect(origin.requests("/\(assetId).mp4") == 0)
        }
        let bench = try await DownloadBench.start(server: server, origin: origin, rights: {
            $0.deviceClock = time
            $0.licenseProvider = provider
            $0.sweepInterval = .milliseconds(50)
        })
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "film", url: origin.url("/film.mp4")))
        #expect(try await bench.waitForOutcome("film").state == .completed)
        let request = try #require(provider.acquired.first)
        #expect(provider.acquired.count == 1 && request.assetId == "film")
        #expect(request.window?.expiryAfterDownloadSeconds == 3 * 86_400)

        // The entitlement is the grant's (its signature is the backplane's tests' business).
        let token = try #require(request.entitlement)
        let parts = token.split(separator: ".")
        #expect(parts.count == 3)
        var payload = String(parts[1]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        payload += String(repeating: "=", count: (4 - payload.count % 4) % 4)
        // JWT dates are seconds since 1970.
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        let claims = try decoder.decode(EntitlementClaims.self, from: try #require(Data(base64Encoded: payload)))
        guard case .granted(let grantId) = try await bench.engine.downloads.asset("film")?.permission else {
            Issue.record("film has no grant")
            return
        }
        #expect(claims.jti == grantId && claims.assetId == "film")

        // A day before the license ends the sweep renews it; nothing else asks again.
        time.advance(by: 86_400 + 1)
        try await bench.engine.rights.sweepExpired()
        #expect(provider.renewed == ["film"])
        // With a new entitlement for the same grant, issued now.
        let renewal = try #require(provider.renewals.first?.entitlement)
        #expect(renewal != token)
        try await bench.engine.rights.sweepExpired()
        #expect(provider.renewed == ["film"])

        // The asset expires (three days after its download): deleted, and its license released.
        time.advance(by: 2 * 86_400)
        _ = try await bench.events.wait(for: "assetExpired")
        // The provider is told off the SDK's path.
        try await bench.wait("the expired asset's license to be released") { provider.released == ["film"] }

        // A user's delete releases the license too.
        origin.serve("/clip.mp4", TestOrigin.content(5_000))
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "clip", url: origin.url("/clip.mp4")))
        #expect(try await bench.waitForOutcome("clip").state == .completed)
        try await bench.engine.downloads.remove(assetId: "clip")
        try await bench.wait("the deleted asset's license to be released") { provider.released == ["film", "clip"] }
        await bench.stop()
    }

    @Test func aProviderThatFailsFailsTheDownloadWithoutFetchingIt() async throws {
        let provider = RecordingProvider(fails: true)
        let bench = try await DownloadBench.start(rights: { $0.licenseProvider = provider })
        bench.origin.serve("/locked.mp4", TestOrigin.content(5_000))
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "locked", url: bench.origin.url("/locked.mp4")))
        let asset = try await bench.waitForOutcome("locked")
        guard case .failed(let failure) = asset.state else {
            Issue.record("locked is \(asset.state), not failed")
            return
        }
        #expect(failure.kind == .license)
        // Asked once per pass, three passes (the rule of threes), and never fetched.
        #expect(provider.acquired.count == 3)
        #expect(bench.origin.requests("/locked.mp4") == 0)
        await bench.stop()
    }

    /// A license the backplane could not be reached for (offline, a 5xx) is not the asset's
    /// failure: the download waits and asks again, past the rule of threes, before any file.
    @Test func aLicenseWithoutAnAnswerIsAskedAgainBeforeTheFilesAndNeverFailsTheAsset() async throws {
        final class Unanswered: LicenseProvider, @unchecked Sendable {
            let lock = NSLock()
            var asked = 0
            func acquireLicense(for asset: LicenseRequest) async throws -> LicenseState {
                let count = lock.withLock { asked += 1; return asked }
                guard count > 4 else { throw BackplaneClientError(kind: .communicationsFailure, message: "offline") }
                return .acquired(until: nil)
            }
            func renewLicense(for asset: LicenseRequest) async throws -> Date? { nil }
            func releaseLicense(assetId: String) async {}
        }
        let provider = Unanswered()
        let bench = try await DownloadBench.start(rights: { $0.licenseProvider = provider })
        bench.origin.serve("/later.mp4", TestOrigin.content(5_000))
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "later", url: bench.origin.url("/later.mp4")))
        let asset = try await bench.waitForOutcome("later")
        #expect(asset.state == .completed, "\(asset.state)")
        #expect(provider.lock.withLock { provider.asked } == 5)
        #expect(bench.origin.requests("/later.mp4") == 1)
        await bench.stop()
    }

    /// A Widevine-protected DASH asset: the provider receives the manifest's PSSH box and default
    /// key id before any segment is fetched, also when the asset was queued while its origin
    /// could not be reached (its manifest is read then, before the provider is asked); the local
    /// MPD keeps both for the player.
    @Test func aDASHAssetsProviderReceivesThePSSHAndTheDefaultKeyId() async throws {
        let pssh = Data([0, 0, 0, 40] + Array("pssh".utf8) + [UInt8](repeating: 9, count: 32))
        let manifest = """
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" xmlns:cenc="urn:mpeg:cenc:2013" type="static" mediaPresentationDuration="PT4S">
              <Period>
                <AdaptationSet contentType="video" mimeType="video/mp4">
                  <ContentProtection schemeIdUri="urn:mpeg:dash:mp4protection:2011" value="cenc" cenc:default_KID="9eb4050d-e44b-4802-932e-27d75083e266"/>
                  <ContentProtection schemeIdUri="urn:uuid:edef8ba9-79d6-4ace-a3c8-27dcd51d21ed"><cenc:pssh>\(pssh.base64EncodedString())</cenc:pssh></ContentProtection>
                  <SegmentTemplate timescale="1" duration="2" media="v$Number$.m4s" initialization="init.mp4"/>
                  <Representation id="v" bandwidth="100000"/>
                </AdaptationSet>
              </Period>
            </MPD>
            """
        let origin = try await TestOrigin.start()
        for file in ["init.mp4", "v1.m4s", "v2.m4s"] { origin.serve("/drm/\(file)", TestOrigin.content(2_000)) }
        let provider = RecordingProvider { [origin] _ in
            #expect(origin.requests(under: "/drm/v").isEmpty, "a segment came before the license")
        }
        let bench = try await DownloadBench.start(origin: origin, rights: { $0.licenseProvider = provider })
        // Queued while the manifest cannot be fetched (a 503): its plan is made at download start.
        origin.serve("/drm/manifest.mpd", Data(manifest.utf8), contentType: "application/dash+xml")
        origin.inject(.failFirst(1_000, status: 503), at: "/drm/manifest.mpd")
        try await bench.engine.downloads.setEnabled(false)
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "drm", url: origin.url("/drm/manifest.mpd"), kind: .dash))
        #expect(origin.requests("/drm/manifest.mpd") == 1)
        origin.inject(nil, at: "/drm/manifest.mpd")
        try await bench.engine.downloads.setEnabled(true)
        let asset = try await bench.waitForOutcome("drm")
        #expect(asset.state == .completed, "\(String(describing: asset.lastFailure))")
        let request = try #require(provider.acquired.first)
        #expect(request.kind == .dash)
        #expect(request.contentProtection == [
            ContentProtection(schemeIdUri: "urn:mpeg:dash:mp4protection:2011", value: "cenc", defaultKID: "9eb4050d-e44b-4802-932e-27d75083e266"),
            ContentProtection(schemeIdUri: "urn:uuid:edef8ba9-79d6-4ace-a3c8-27dcd51d21ed", pssh: pssh),
        ])
        #expect(request.contentProtection.last?.systemId == "edef8ba9-79d6-4ace-a3c8-27dcd51d21ed")
        let local = try String(contentsOf: try #require(asset.localURL), encoding: .utf8)
        #expect(local.contains("<cenc:pssh>\(pssh.base64EncodedString())</cenc:pssh>") && local.contains("cenc:default_KID="))
        await bench.stop()
    }

    /// A PlayReady-protected Smooth Streaming (PIFF) asset: the provider receives the manifest's
    /// protection header as a `pssh` box for PlayReady's system id, with the key id the header
    /// names, before any fragment is fetched; the local manifest keeps the header for the player.
    @Test func aSmoothStreamingAssetsProviderReceivesThePlayReadyHeader() async throws {
        let object = SmoothManifestTests.playReadyObject()
        let manifest = """
            <SmoothStreamingMedia MajorVersion="2" MinorVersion="0" Duration="40000000">
              <Protection><ProtectionHeader SystemID="9a04f079-9840-4286-ab92-e65be0885f95">\(object.base64EncodedString())</ProtectionHeader></Protection>
              <StreamIndex Type="video" Url="QualityLevels({bitrate})/Fragments(video={start time})">
                <QualityLevel Index="0" Bitrate="100000" FourCC="H264" CodecPrivateData="00"/>
                <c t="0" d="20000000" r="2"/>
              </StreamIndex>
            </SmoothStreamingMedia>
            """
        let origin = try await TestOrigin.start()
        origin.serve("/pr/film.ism/Manifest", Data(manifest.utf8), contentType: "text/xml")
        for time in [0, 20_000_000] { origin.serve("/pr/film.ism/QualityLevels(100000)/Fragments(video=\(time))", TestOrigin.content(2_000)) }
        let provider = RecordingProvider { [origin] _ in
            #expect(origin.requests(under: "/pr/film.ism/QualityLevels").isEmpty, "a fragment came before the license")
        }
        let bench = try await DownloadBench.start(origin: origin, rights: { $0.licenseProvider = provider })
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "pr", url: origin.url("/pr/film.ism/Manifest"), kind: .smooth))
        let asset = try await bench.waitForOutcome("pr")
        #expect(asset.state == .completed, "\(String(describing: asset.lastFailure))")
        let request = try #require(provider.acquired.first)
        #expect(request.kind == .smooth)
        let protection = try #require(request.contentProtection.first)
        #expect(protection.systemId == "9a04f079-9840-4286-ab92-e65be0885f95")
        #expect(protection.defaultKID == "9eb4050d-e44b-4802-932e-27d75083e266")
        #expect(protection.pssh.map { $0.suffix(object.count) == object } == true)
        #expect(origin.requests(under: "/pr/film.ism/QualityLevels").count == 2)
        let local = try String(contentsOf: try #require(asset.localURL), encoding: .utf8)
        #expect(local.contains(object.base64EncodedString()), "\(local)")
        await bench.stop()
    }
}
