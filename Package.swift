// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "Backplane",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "BackplaneWire", targets: ["BackplaneWire"]),
        .library(name: "Backplane", targets: ["Backplane"]),
        .library(name: "ClientSDK", targets: ["ClientSDK"]),
        .executable(name: "backplane", targets: ["BackplaneCommand"]),
        .executable(name: "backplane-harness", targets: ["BackplaneHarness"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        // Signs download entitlements (JWS, EdDSA) and, in the tests, verifies them as a license server would.
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        // The store for several nodes (PostgresStore).
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        // TLS settings of the PostgreSQL connections (already in the graph through postgres-nio).
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        // /metrics: the swift-metrics API in the services, Prometheus text exposition by swift-prometheus.
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // The admin console's pages: logic-less templates that HTML-escape every value by default.
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
        // The tests' local APNs and Google endpoints speak HTTP/2 as the providers do
        // (`LocalHTTP2Server`); the backplane's own client gets it through async-http-client.
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
    ],
    targets: [
        // Wire models shared by the server and the SDK: Foundation only. Named for what it holds
        // rather than "Shared", a name apps often give a module of their own; ClientSDK and
        // Backplane re-export it, so an app writes `import ClientSDK` and nothing else.
        .target(name: "BackplaneWire", path: "Sources/Shared"),
        .target(
            name: "Backplane",
            dependencies: [
                "BackplaneWire",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "GRDB", package: "GRDB.swift"),
                // SQLite itself, for the few reads that step a statement directly (`ColumnCursor`).
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                // HTTP/1 heads to HTTPTypes requests, for the channel upgrade's router.
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "JWTKit", package: "jwt-kit"),
                // Fetches the key sets applications publish for their user tokens (`JWKSFetcher`).
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Mustache", package: "swift-mustache"),
            ]
        ),
        .executableTarget(
            name: "BackplaneCommand",
            dependencies: [
                "Backplane",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // The app side. Must build wherever Swift runs: nothing Linux-only.
        .target(
            name: "ClientSDK",
            dependencies: [
                "BackplaneWire",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                // The playback server's HTTP/1.1 pipeline (`PlaybackServer`): NIO's, not a server framework.
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                // A private certificate authority trusted for the backplane (`trustedCertificateAuthorities`).
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // What a real app would be: ClientSDK only (it re-exports the wire types).
        .executableTarget(
            name: "BackplaneHarness",
            dependencies: [
                "ClientSDK",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // benchmarks/push: the tests' local APNs and Google endpoints as a process of their own,
        // which the benchmark's server pushes to. Run by benchmarks/push/run.sh only.
        .executableTarget(name: "PushBenchEndpoints", dependencies: ["TestSupport", "BackplaneWire"], path: "benchmarks/push/Endpoints"),
        // The SDK guide's code blocks, compiled so the guide cannot drift from the API. Never run.
        .executableTarget(name: "SDKGuideExamples", dependencies: ["ClientSDK"], path: "Examples/SDKGuide"),
        // Helpers shared by the test targets (child processes, temporary directories, the test application).
        .target(
            name: "TestSupport",
            dependencies: [
                "Backplane",
                .product(name: "JWTKit", package: "jwt-kit"),
                // The keys the local push providers trust (`PushRig`).
                .product(name: "Crypto", package: "swift-crypto"),
                // `LocalHTTP2Server`: TLS with ALPN, HTTP/2 streams read as HTTP/1 parts.
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                // `TestLicenseServer` fetches the backplane's entitlement keys, as a license server does.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            path: "Tests/TestSupport"),
        .testTarget(
            name: "ClientSDKTests",
            dependencies: [
                "TestSupport",
                "ClientSDK",
                "Backplane",
                "BackplaneWire",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                // A server that closes a kept-alive connection under a request, and an origin
                // that answers raw bytes (`HostileOrigin`), its requests read by NIO's decoder.
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                // Puts an asset's records where the first naming rule left them (`AssetDirectoryTests`).
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                // Signs user tokens as an app's backend would (`HarnessUserTokenTests`).
                .product(name: "JWTKit", package: "jwt-kit"),
            ],
            // The EME player page and its Selenium driver, run by `EMEPlaybackTests` from here.
            exclude: ["Licenses/EME"]
        ),
        .testTarget(
            name: "BackplaneTests",
            dependencies: [
                "TestSupport",
                "Backplane",
                "BackplaneWire",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                // The connection guard on a channel whose clock the test moves.
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                // Triggers a graceful shutdown, as SIGTERM would, without a signal.
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
                // Makes a backup look as if a newer version wrote it.
                .product(name: "GRDB", package: "GRDB.swift"),
                // An https origin for an application's key-set URL (`UserTokenURLTests`).
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
