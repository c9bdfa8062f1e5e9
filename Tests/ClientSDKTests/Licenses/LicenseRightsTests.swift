import Foundation
import Testing
import BackplaneWire
@testable import ClientSDK

/// A license's end joins an asset's rights: the first end wins, a license ended by the backplane
/// or run out offline makes `licenseExpired`, and it is judged on trusted time only.
@Suite struct LicenseRightsTests {
    let now = Date(timeIntervalSince1970: 1_900_000_000)
    let window = DownloadWindow(expiryDate: Date(timeIntervalSince1970: 1_900_086_400), expiryAfterDownloadSeconds: -1,
                                expiryAfterPlaySeconds: -1, offlineViewingPeriodSeconds: -1)

    func rights(_ license: LicenseState?, at time: TrustedTime? = nil, window: DownloadWindow? = nil) -> AssetRights {
        RightsFacts(window: window ?? self.window, downloadedAt: now, firstPlayedAt: nil)
            .rights(at: time ?? .trusted(now), lastSync: now, license: license)
    }

    @Test func theFirstEndWinsAndALicenseThatRanOutExpiresTheAsset() {
        let soon = now.addingTimeInterval(3_600)
        #expect(rights(.acquired(until: soon)) == .valid(until: soon))
        #expect(rights(.acquired(until: now.addingTimeInterval(7 * 86_400))) == .valid(until: window.expiryDate))
        #expect(rights(.acquired(until: now)) == .licenseExpired(at: now), "offline, the license plays to its end and no further")
        #expect(rights(.ended(reason: "grantEnded")) == .licenseExpired(at: nil))
        #expect(rights(.ended(reason: "grantEnded")).name == "licenseExpired")
        // No end, or no license at all: the window alone.
        for license: LicenseState? in [.acquired(until: nil), .notRequired, nil] {
            #expect(rights(license) == .valid(until: window.expiryDate))
        }
        // A window without time limits still needs trusted time to judge a license's end.
        let open = DownloadWindow(expiryAfterDownloadSeconds: -1, expiryAfterPlaySeconds: -1, offlineViewingPeriodSeconds: -1)
        #expect(rights(.acquired(until: soon), at: .untrusted(.deviceClockChanged), window: open) == .untrustedTime(.deviceClockChanged))
        #expect(rights(.acquired(until: soon), window: open) == .valid(until: soon))
        #expect(rights(.notRequired, at: .untrusted(.deviceClockChanged), window: open) == .valid(until: nil))
    }
}
