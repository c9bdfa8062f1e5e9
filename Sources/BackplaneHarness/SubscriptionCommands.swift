import ArgumentParser
import ClientSDK
import Foundation

// Subscriptions and feeds, and publishing as the CMS would.

struct Subscribe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Subscribe to a feed (or change its rules) and sync its episodes.")
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The feed id.") var feed: String
    @Option(help: "Keep at most this many items of the feed (0: unlimited).") var maxItems: Int?
    @Option(help: "At the quota: true resets the oldest items, false defers new ones.") var autodelete: Bool?

    func run() async throws {
        try await Session.run(try connection.configuration()) { engine in
            let subscription = try await engine.subscriptions.subscribe(feedId: feed, maxItems: maxItems, autodeleteOldItems: autodelete)
            return .object([
                "subscription": Output.json(subscription),
                "queue": Output.json(try await engine.subscriptions.items(feedId: feed)),
            ])
        }
    }
}

struct Unsubscribe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Unsubscribe from a feed (queued and downloaded items stay).")
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The feed id.") var feed: String

    func run() async throws {
        try await Session.run(try connection.configuration()) { engine in
            try await engine.subscriptions.unsubscribe(feedId: feed)
            return nil
        }
    }
}

struct Feeds: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List this device's subscriptions (after a sync).")
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await Session.run(try connection.configuration()) { engine in
            .object(["subscriptions": Output.json(try await engine.subscriptions.list())])
        }
    }
}

/// The CMS side, for demos and tests: creates the feed if needed and publishes episodes.
struct CMSPublish: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cms-publish",
        abstract: "As the CMS: create a feed if needed and publish test episodes (needs a token of scope cms).")
    @Option(name: .customLong("backplane-url"), help: "Backplane URL (or BACKPLANE_URL).") var backplaneURL: String?
    @Option(help: "A bearer token of scope cms (or BACKPLANE_CMS_TOKEN).") var token: String?
    @Option(help: "The feed id.") var feed: String
    @Option(help: "The feed title (when it is created).") var title: String?
    @Option(parsing: .upToNextOption, help: "Asset ids to publish.") var asset: [String]
    @Flag(help: "Publish asset ids only, without download metadata.") var assetIdOnly = false
    @Option(help: "PEM file of certificate authorities to trust besides the system's (or BACKPLANE_CA_FILE).") var caFile: String?

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        guard let base = (backplaneURL ?? environment["BACKPLANE_URL"]).flatMap(URL.init(string:)) else {
            throw ValidationError("Missing --backplane-url (or BACKPLANE_URL).")
        }
        guard let token = token ?? environment["BACKPLANE_CMS_TOKEN"] else {
            throw ValidationError("Missing --token (or BACKPLANE_CMS_TOKEN).")
        }
        let authorities = (caFile ?? environment["BACKPLANE_CA_FILE"]).flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0) }
        let transport = try authorities.map(HTTPClientTransport.init(trusting:)) ?? HTTPClientTransport()
        func call(_ method: String, _ path: String, _ body: some Encodable) async throws -> Data {
            let response = try await transport.send(TransportRequest(
                method: method, url: base.appendingPathComponent(path),
                headers: [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json")],
                body: try Output.encoder.encode(body), timeout: .seconds(30)))
            guard (200..<300).contains(response.status) else {
                FileHandle.standardError.write(Data("backplane-harness: \(method) \(path): HTTP \(response.status) \(String(decoding: response.body, as: UTF8.self))\n".utf8))
                throw ExitCode(response.status == 401 || response.status == 403 ? 4 : 1)
            }
            return response.body
        }
        _ = try await call("PUT", "v1/cms/feeds/\(feed)", FeedInput(title: title ?? feed))
        let episodes = asset.map { id in
            assetIdOnly ? EpisodeInput(assetId: id)
                : EpisodeInput(assetId: id, title: "Episode \(id)", downloadURL: "https://cdn.example.com/\(feed)/\(id).mp4", mediaType: .file)
        }
        let answer = try await call("POST", "v1/cms/feeds/\(feed)/episodes", PublishEpisodesRequest(episodes: episodes))
        FileHandle.standardOutput.write(answer + Data("\n".utf8))
    }
}
