import Foundation
import BackplaneWire
import Testing
import TestSupport
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The deployment as shipped: Debian's nginx with `deploy/nginx/backplane.conf`, a certificate
/// from a CA this test makes, the built backplane behind it, and the built harness talking
/// `https://` and `wss://` through it with that CA trusted (`--ca-file`).
///
/// Needs nginx and openssl. Without them the test is skipped with a warning, unless
/// BACKPLANE_REQUIRE_DEPLOY_TOOLS=1 (CI), which fails it; BACKPLANE_PROXY_REPORT names a file
/// it writes when it ran, which CI checks.
@Suite(.serialized) struct ProxyEndToEndTests {
    @Test func theHarnessRegistersSyncsAndIsWokenThroughNginxWithAPrivateCA() async throws {
        guard let nginx = Self.tool(["/usr/sbin/nginx", "/usr/bin/nginx"]), let openssl = Self.tool(["/usr/bin/openssl"]) else {
            let message = "nginx or openssl is not installed (apt-get install nginx-light openssl): the TLS proxy test did not run"
            if ProcessInfo.processInfo.environment["BACKPLANE_REQUIRE_DEPLOY_TOOLS"] == "1" { Issue.record(Comment(rawValue: message)) }
            print("warning: \(message)")
            return
        }
        let harness = try #require(BuiltProduct.url(named: "backplane-harness"))
        let root = try createdTemporaryDirectory("backplane-proxy")
        defer { try? FileManager.default.removeItem(at: root) }

        let ca = try await TestCertificates.make(in: root, openssl: openssl).authority
        let backplane = try await HarnessEndToEndTests.ServedBackplane(root: root)
        defer { backplane.process.terminate() }
        let (tlsPort, plainPort) = (try freePort(), try freePort())
        try Self.writeConfiguration(in: root, backplanePort: backplane.port, tlsPort: tlsPort, plainPort: plainPort)
        let proxy = try ChildProcess(nginx, ["-p", root.path, "-c", root.appendingPathComponent("nginx.conf").path])
        defer { proxy.terminate() }
        try await Self.waitUntilListening(tlsPort, proxy)

        let base = "https://localhost:\(tlsPort)"
        let environment = [
            "BACKPLANE_URL": base, "BACKPLANE_APP_KEY": backplane.keyId, "BACKPLANE_APP_SECRET": backplane.secret,
            "BACKPLANE_USER": "alice", "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
        ]
        let device = root.appendingPathComponent("device").path

        // The system's trust store alone does not know the private CA: the harness refuses the proxy.
        let untrusted = try await ChildProcess.run(harness, ["sync", "--data-dir", device], environment: environment)
        #expect(untrusted.status == 5, "expected 'backplane unreachable': \(untrusted.output)")
        #expect(untrusted.output.lowercased().contains("certificate"), "\(untrusted.output)")

        var trusted = environment
        trusted["BACKPLANE_CA_FILE"] = ca.path
        let synced = try await ChildProcess.run(harness, ["sync", "--data-dir", device], environment: trusted)
        #expect(synced.status == 0, "\(synced.output)")
        #expect(synced.output.contains(#""events":["registered","syncCompleted""#), "\(synced.output)")

        // The channel through nginx (wss://): a wipe posted to the backplane wakes the device at
        // once; its interval is an hour, so only the wake-up can bring the command.
        let watch = try ChildProcess(harness, ["watch", "--interval", "3600", "--data-dir", device], environment: trusted)
        defer { watch.terminate() }
        _ = try await watch.waitForOutput(containing: #""connected":true"#, timeout: .seconds(30))
        let deviceId = try #require(Self.deviceId(in: synced.output))
        try await HarnessEndToEndTests.adminRequest(
            backplane.baseURL, "POST", "/v1/admin/commands", token: backplane.admin, body: #"{"type":"wipe","deviceId":"\#(deviceId)"}"#)
        _ = try await watch.waitForOutput(containing: #""event":"remoteWipe""#, timeout: .seconds(20))

        // nginx upgraded the channel (101, not the 307 a reused keep-alive connection gets), and
        // the backplane's access line carries the id nginx gave the request. nginx logs a
        // tunnelled request when it ends: stop the device first.
        watch.signal(SIGINT)
        _ = try await watch.waitForExit(timeout: .seconds(15))
        var channel: Substring?
        var log = ""
        for _ in 0..<100 where channel == nil {
            log = (try? String(contentsOf: root.appendingPathComponent("access.log"), encoding: .utf8)) ?? ""
            channel = log.split(separator: "\n").first { $0.contains("/v1/devices/\(deviceId)/channel") && $0.hasSuffix(" 101") }
            if channel == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        let upgraded = try #require(channel, "no upgraded channel in nginx's log:\n\(log)")
        let requestId = try #require(upgraded.split(separator: " ").first.map(String.init))
        #expect(backplane.process.output.contains("request_id=\(requestId)"), "the backplane logged another id for the channel")

        if let report = ProcessInfo.processInfo.environment["BACKPLANE_PROXY_REPORT"] {
            try "nginx TLS proxy: register, sync and a wake-up over wss passed\n".write(toFile: report, atomically: true, encoding: .utf8)
        }
    }

    static func tool(_ candidates: [String]) -> URL? {
        candidates.map(URL.init(fileURLWithPath:)).first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }

    /// nginx's main file around the shipped site file, whose "site:" lines (addresses,
    /// certificate) become this test's. Each replacement must apply: a change to the shipped
    /// file's shape fails here rather than testing something else.
    static func writeConfiguration(in root: URL, backplanePort: Int, tlsPort: Int, plainPort: Int) throws {
        var site = try String(contentsOf: BuiltProduct.packageRoot.appendingPathComponent("deploy/nginx/backplane.conf"), encoding: .utf8)
        for (shipped, local) in [
            ("server backplane-a:8080", "server 127.0.0.1:\(backplanePort)"),
            ("server backplane-b:8080", "server 127.0.0.1:\(backplanePort)"),
            ("listen 80;", "listen 127.0.0.1:\(plainPort);"),
            ("listen 443 ssl http2;", "listen 127.0.0.1:\(tlsPort) ssl http2;"),
            ("/etc/nginx/tls/backplane.crt", root.appendingPathComponent("server.crt").path),
            ("/etc/nginx/tls/backplane.key", root.appendingPathComponent("server.key").path),
        ] {
            try #require(site.contains(shipped), "deploy/nginx/backplane.conf no longer has '\(shipped)'")
            site = site.replacingOccurrences(of: shipped, with: local)
        }
        try site.write(to: root.appendingPathComponent("site.conf"), atomically: true, encoding: .utf8)
        let main = """
            daemon off;
            master_process off;
            worker_processes 1;
            pid \(root.path)/nginx.pid;
            error_log stderr warn;
            events { worker_connections 256; }
            http {
                log_format backplane '$request_id "$request" $status';
                access_log \(root.path)/access.log backplane;
                client_body_temp_path \(root.path)/body;
                proxy_temp_path \(root.path)/proxy;
                include \(root.path)/site.conf;
            }
            """
        try main.write(to: root.appendingPathComponent("nginx.conf"), atomically: true, encoding: .utf8)
    }

    static func waitUntilListening(_ port: Int, _ proxy: ChildProcess) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            if let connection = try? RawConnection(port: port) {
                connection.disconnect()
                return
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("nginx did not start: \(proxy.output)")
        throw CancellationError()
    }

    /// The device id in the summary `sync` prints.
    static func deviceId(in output: String) -> String? {
        let summary = output.split(separator: "\n").compactMap { line in
            try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        }.first { $0["status"] != nil }
        return (summary?["status"] as? [String: Any])?["deviceId"] as? String
    }
}
