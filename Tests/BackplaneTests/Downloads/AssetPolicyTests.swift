import Backplane
import Foundation
import HTTPTypes
import HummingbirdTesting
import BackplaneWire
import Testing

/// An asset's availability and lifetime limit: the application's settings, under the asset's
/// episode, under an admin's policy; the grant carries the result.
@Suite struct AssetPolicyTests {
    private let publish = Date(timeIntervalSince1970: 1_900_000_000)

    private func grant(_ client: Client, _ assetId: String, as identity: DeviceIdentity) async throws -> TestResponse {
        try await client.device(.post, "/v1/download-grants", json: DownloadPermissionRequest(assetId: assetId), as: identity)
    }

    @Test func theGrantCarriesThePolicyOverTheEpisodeOverTheSettings() async throws {
        let fixture = try await Fixture.make()
        _ = try await fixture.services.applications.updateSettings(applicationId: fixture.applicationId, ApplicationSettingsUpdate { $0.expiryAfterDownloadSeconds = 86_400; $0.expiryAfterPlaySeconds = 7_200; $0.offlineViewingPeriodSeconds = 604_800; $0.maxLifetimeDownloadsPerAsset = 5 })
        let cms = try await fixture.services.applications.createToken(applicationId: fixture.applicationId, scope: .cms, name: "cms")
        try await fixture.test { client in
            let phone = try await client.register(user: "ann", device: "phone").0
            let episode = EpisodeInput(
                assetId: "film", title: "Film", downloadURL: "https://cdn.example.com/film.mp4", mediaType: .file,
                publishDate: publish, expiryDate: publish.addingTimeInterval(30 * 86_400), expiryAfterPlaySeconds: 3_600,
                maxLifetimeDownloads: 2)
            _ = try await client.admin(.put, "/v1/cms/feeds/films", json: FeedInput(title: "Films"), token: cms)
            let published = try await client.admin(
                .post, "/v1/cms/feeds/films/episodes", json: PublishEpisodesRequest(episodes: [episode]), token: cms)
            #expect(published.status == .ok || published.status == .created, "\(published.text)")

            // The episode over the settings.
            let first = try await grant(client, "film", as: phone)
            #expect(first.status == .created, "\(first.text)")
            let fromEpisode = try first.decode(DownloadPermissionResponse.self)
            #expect(fromEpisode.grant.window == DownloadWindow(
                publishDate: publish, expiryDate: publish.addingTimeInterval(30 * 86_400), expiryAfterDownloadSeconds: 86_400,
                expiryAfterPlaySeconds: 3_600, offlineViewingPeriodSeconds: 604_800))
            // The episode's limit of two tightens the application's five.
            #expect(fromEpisode.counts.assetLifetime == DownloadCount(used: 1, limit: 2))
            _ = try await client.device(.post, "/v1/sync", json: SyncRequest(downloadReports: [
                .init(grantId: fromEpisode.grant.grantId, outcome: .deleted),
            ]), as: phone)

            // An admin's policy replaces the application's limit (the episode's still tightens
            // it) and its dates replace the episode's, as a pair.
            let strict = AssetPolicy(maxLifetimeDownloads: 1)
            #expect(try await client.admin(.put, "/v1/admin/asset-policies/film", json: strict).status == .ok)
            let denied = try await grant(client, "film", as: phone)
            #expect(denied.errorDetails?["rule"] == .string("assetLifetime"), "\(denied.text)")
            let later = publish.addingTimeInterval(86_400)
            let policy = AssetPolicy(
                publishDate: later, expiryDate: later.addingTimeInterval(60 * 86_400), expiryAfterPlaySeconds: -1, maxLifetimeDownloads: 9)
            let set = try await client.admin(.put, "/v1/admin/asset-policies/film", json: policy)
            #expect(set.status == .ok, "\(set.text)")
            #expect(try set.decode(AssetPolicyEntry.self).policy == policy)
            #expect(try await client.admin(.get, "/v1/admin/asset-policies/film").decode(AssetPolicyEntry.self).policy == policy)

            let second = try await grant(client, "film", as: phone)
            #expect(second.status == .created, "\(second.text)")
            let fromPolicy = try second.decode(DownloadPermissionResponse.self)
            #expect(fromPolicy.grant.window == DownloadWindow(
                publishDate: later, expiryDate: later.addingTimeInterval(60 * 86_400), expiryAfterDownloadSeconds: 86_400,
                expiryAfterPlaySeconds: -1, offlineViewingPeriodSeconds: 604_800))
            #expect(fromPolicy.counts.assetLifetime == DownloadCount(used: 2, limit: 2))

            // Without the policy the episode's rules are back: two of two used.
            #expect(try await client.admin(.delete, "/v1/admin/asset-policies/film").status == .noContent)
            #expect(try await client.admin(.get, "/v1/admin/asset-policies/film").status == .notFound)
            let other = try await client.register(user: "ann", device: "tablet").0
            #expect(try await grant(client, "film", as: other).errorDetails?["rule"] == .string("assetLifetime"))
        }
    }

    @Test func aRenewalAnswersTheHeldGrantAndNeverCreatesOne() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let phone = try await client.register(user: "ann", device: "phone").0
            let first = try await grant(client, "film", as: phone).decode(DownloadPermissionResponse.self)
            let renew = DownloadPermissionRequest(assetId: "film", grantId: first.grant.grantId)
            let renewed = try await client.device(.post, "/v1/download-grants", json: renew, as: phone)
            #expect(renewed.status == .ok, "\(renewed.text)")
            #expect(try renewed.decode(DownloadPermissionResponse.self).grant.grantId == first.grant.grantId)

            // Once the grant has ended, a renewal is refused and grants nothing.
            _ = try await client.device(.post, "/v1/sync", json: SyncRequest(downloadReports: [
                .init(grantId: first.grant.grantId, outcome: .deleted),
            ]), as: phone)
            let refused = try await client.device(.post, "/v1/download-grants", json: renew, as: phone)
            #expect(refused.status == .conflict && refused.errorCode == .conflict, "\(refused.text)")
            let grants = try await client.admin(.get, "/v1/admin/download-grants?userId=ann").decode(DownloadGrantPage.self)
            #expect(grants.grants.map(\.state) == [.deleted])
        }
    }

    @Test func badPoliciesAreRefusedAndStoreNothing() async throws {
        let fixture = try await Fixture.make()
        let cms = try await fixture.services.applications.createToken(applicationId: fixture.applicationId, scope: .cms, name: "cms")
        try await fixture.test { client in
            for (policy, field) in [
                (AssetPolicy(publishDate: publish, expiryDate: publish.addingTimeInterval(-1)), "expiryDate"),
                (AssetPolicy(publishDate: publish, expiryDate: publish), "expiryDate"),
                (AssetPolicy(expiryAfterDownloadSeconds: -2), "expiryAfterDownloadSeconds"),
                (AssetPolicy(expiryAfterPlaySeconds: Int(Int32.max) + 1), "expiryAfterPlaySeconds"),
                (AssetPolicy(maxLifetimeDownloads: -5), "maxLifetimeDownloads"),
                (AssetPolicy(expiryDate: Date(timeIntervalSince1970: 1e12)), "expiryDate"),
            ] {
                let response = try await client.admin(.put, "/v1/admin/asset-policies/film", json: policy)
                #expect(response.status == .badRequest, "\(policy): \(response.text)")
                #expect(response.errorDetails?["field"] == .string(field))
            }
            #expect(try await client.admin(.get, "/v1/admin/asset-policies/film").status == .notFound)
            #expect(try await client.admin(.delete, "/v1/admin/asset-policies/film").status == .notFound)
            let tooLong = String(repeating: "x", count: 129)
            #expect(try await client.admin(.put, "/v1/admin/asset-policies/\(tooLong)", json: AssetPolicy()).status == .badRequest)
            // A policy is an admin's: a CMS token may not set one.
            #expect(try await client.admin(.put, "/v1/admin/asset-policies/film", json: AssetPolicy(), token: cms).status == .forbidden)

            // An episode whose window ends before it starts, or with a negative limit, is refused too.
            _ = try await client.admin(.put, "/v1/cms/feeds/films", json: FeedInput(title: "Films"), token: cms)
            for episode in [
                EpisodeInput(assetId: "e1", publishDate: publish, expiryDate: publish.addingTimeInterval(-60)),
                EpisodeInput(assetId: "e2", maxLifetimeDownloads: -2),
            ] {
                let response = try await client.admin(
                    .post, "/v1/cms/feeds/films/episodes", json: PublishEpisodesRequest(episodes: [episode]), token: cms)
                #expect(response.status == .badRequest, "\(response.text)")
            }
        }
    }
}
