import Hummingbird
import BackplaneWire

// The BackplaneWire types are what the routes return.
extension AppKey: ResponseEncodable {}
extension AssetPolicyEntry: ResponseEncodable {}
extension AppKeyList: ResponseEncodable {}
extension UserIdentityResponse: ResponseEncodable {}
extension PushConfigurationResponse: ResponseEncodable {}
extension APNsConfiguration: ResponseEncodable {}
extension FCMConfiguration: ResponseEncodable {}
extension Command: ResponseEncodable {}
extension CommandList: ResponseEncodable {}
extension CreatedAppKey: ResponseEncodable {}
extension CreatedToken: ResponseEncodable {}
extension DevicePage: ResponseEncodable {}
extension CommandPage: ResponseEncodable {}
extension ContentKeyList: ResponseEncodable {}
extension License: ResponseEncodable {}
extension LicenseIssueResponse: ResponseEncodable {}
extension LicenseList: ResponseEncodable {}
extension LicenseReleaseResponse: ResponseEncodable {}
extension LicenseServer: ResponseEncodable {}
extension LicenseServerList: ResponseEncodable {}
extension GeneratedContentKey: ResponseEncodable {}
extension DownloadGrantPage: ResponseEncodable {}
extension DownloadPermissionResponse: ResponseEncodable {}
extension EntitlementKeySet: ResponseEncodable {}
extension DeviceResponse: ResponseEncodable {}
extension Episode: ResponseEncodable {}
extension EpisodeChanges: ResponseEncodable {}
extension EpisodeList: ResponseEncodable {}
extension EventBatchResponse: ResponseEncodable {}
extension EventCounts: ResponseEncodable {}
extension EventPage: ResponseEncodable {}
extension Feed: ResponseEncodable {}
extension FeedList: ResponseEncodable {}
extension HealthStatus: ResponseEncodable {}
extension LifetimeResetResponse: ResponseEncodable {}
extension RegisterDeviceResponse: ResponseEncodable {}
extension RevokedGrant: ResponseEncodable {}
extension SettingsResponse: ResponseEncodable {}
extension SubscribeResponse: ResponseEncodable {}
extension SubscriptionList: ResponseEncodable {}
extension TokenInfo: ResponseEncodable {}
extension TokenList: ResponseEncodable {}
extension UserDevicesResponse: ResponseEncodable {}

/// The answer every device's sync gets, written without `JSONEncoder` (`SyncResponse.wireJSON`):
/// the same bytes, at a fraction of the cost.
extension SyncResponse: ResponseGenerator {
    public func response(from request: Request, context: some RequestContext) throws -> Response {
        let bytes = try wireJSON()
        return Response(
            status: .ok,
            headers: [.contentType: "application/json; charset=utf-8", .contentLength: String(bytes.count)],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}
