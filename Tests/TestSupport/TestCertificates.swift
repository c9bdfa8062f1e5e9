import Foundation

/// A throwaway certificate authority and a certificate it signs for localhost and 127.0.0.1,
/// made by the openssl command: for the TLS a test needs (a proxy, a key-set URL).
public enum TestCertificates {
    public struct Made: Sendable {
        /// The CA's certificate, to trust.
        public var authority: URL
        /// The server's certificate and private key (PEM).
        public var certificate: URL
        public var privateKey: URL
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// openssl, where Debian puts it; nil when it is not installed.
    public static var openssl: URL? {
        let path = "/usr/bin/openssl"
        return FileManager.default.isExecutableFile(atPath: path) ? URL(fileURLWithPath: path) : nil
    }

    /// Certificates in a new temporary directory for a test that needs TLS, or nil when openssl
    /// is not installed: the test then did not run, which it says; where the tools are required
    /// (`BACKPLANE_REQUIRE_DEPLOY_TOOLS=1`, as in CI) it throws instead, failing the test.
    public static func madeForTest(_ name: String, what: String) async throws -> Made? {
        guard let openssl else {
            let message = "openssl is not installed (apt-get install openssl): \(what) did not run"
            if ProcessInfo.processInfo.environment["BACKPLANE_REQUIRE_DEPLOY_TOOLS"] == "1" { throw Failure(description: message) }
            print("warning: \(message)")
            return nil
        }
        return try await make(in: try createdTemporaryDirectory(name), openssl: openssl)
    }

    public static func make(in root: URL, openssl: URL) async throws -> Made {
        let path = { (name: String) in root.appendingPathComponent(name).path }
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=critical,CA:FALSE\n"
            .write(toFile: path("server.ext"), atomically: true, encoding: .utf8)
        for arguments in [
            ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=Backplane Test CA",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             "-keyout", path("ca.key"), "-out", path("ca.crt")],
            ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", path("server.key"), "-out", path("server.csr")],
            ["x509", "-req", "-in", path("server.csr"), "-CA", path("ca.crt"), "-CAkey", path("ca.key"), "-CAcreateserial",
             "-days", "2", "-extfile", path("server.ext"), "-out", path("server.crt")],
        ] {
            let made = try await ChildProcess.run(openssl, arguments)
            guard made.status == 0 else { throw Failure(description: "openssl \(arguments[0]): \(made.output)") }
        }
        return Made(
            authority: root.appendingPathComponent("ca.crt"), certificate: root.appendingPathComponent("server.crt"),
            privateKey: root.appendingPathComponent("server.key"))
    }
}
