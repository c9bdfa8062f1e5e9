import ArgumentParser
import ClientSDK
import Foundation

// Downloaded assets: add a file as one, list them.

struct AddFile: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add-file",
        abstract: "Put a file the app already has in place as a downloaded asset.")
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "The asset id.") var asset: String
    @Option(help: "The file to copy in.") var file: String

    func run() async throws {
        let engine = BackplaneEngine(configuration: try connection.configuration())
        do {
            let added = try await engine.addDownloadedAsset(assetId: asset, copying: URL(fileURLWithPath: file))
            Output.print(AssetOutput(added, url: await engine.fileURL(of: added)))
        } catch let error as BackplaneClientError {
            Output.fail(error)
        }
    }
}

struct Assets: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the downloaded assets (the file or local HLS playlist to play) and the subscription items (local, no network).")
    @OptionGroup var connection: ConnectionOptions

    struct Listing: Encodable {
        var assets: [AssetOutput]
        var queue: [SubscriptionItem]
    }

    func run() async throws {
        let engine = BackplaneEngine(configuration: try connection.configuration())
        do {
            var outputs: [AssetOutput] = []
            for asset in try await engine.downloadedAssets() {
                outputs.append(AssetOutput(asset, url: await engine.fileURL(of: asset)))
            }
            Output.print(Listing(assets: outputs, queue: try await engine.subscriptions.items()))
        } catch let error as BackplaneClientError {
            Output.fail(error)
        }
    }
}

struct AssetOutput: Encodable {
    var assetId: String
    var path: String?
    var size: Int64
    var fileExists: Bool

    init(_ asset: LocalAsset, url: URL?) {
        assetId = asset.assetId
        path = url?.path
        size = asset.size
        fileExists = url.map { FileManager.default.fileExists(atPath: $0.path) } ?? false
    }
}
