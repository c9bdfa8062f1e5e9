import AsyncHTTPClient
import Foundation
import NIOCore

/// One HTTP exchange. The SDK signs and encodes; a transport only moves bytes.
public struct TransportRequest: Sendable {
    public var method: String
    public var url: URL
    public var headers: [(name: String, value: String)]
    public var body: Data
    public var timeout: Duration

    public init(method: String, url: URL, headers: [(name: String, value: String)], body: Data, timeout: Duration) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

public struct TransportResponse: Sendable {
    public var status: Int
    public var body: Data

    public init(status: Int, body: Data) {
        self.status = status
        self.body = body
    }
}

/// How the SDK talks HTTP. Throw for anything that is not an HTTP answer (no connection, timeout).
public protocol Transport: Sendable {
    func send(_ request: TransportRequest) async throws -> TransportResponse
}

/// The default transport, on async-http-client.
public struct HTTPClientTransport: Transport {
    /// Answers larger than this are refused; the backplane's are far smaller.
    public static let maxResponseBytes = 16 << 20
    let client: HTTPClient

    public init(client: HTTPClient = .shared) {
        self.client = client
    }

    /// Trusting the certificate authorities in `authorities` (a PEM file) besides the system's.
    public init(trusting authorities: URL) throws {
        self.client = try TrustedAuthorities.httpClient(trusting: authorities)
    }

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        var outgoing = HTTPClientRequest(url: request.url.absoluteString)
        outgoing.method = .init(rawValue: request.method)
        for (name, value) in request.headers {
            outgoing.headers.add(name: name, value: value)
        }
        if !request.body.isEmpty {
            outgoing.body = .bytes(ByteBuffer(bytes: request.body))
        }
        let response = try await client.execute(outgoing, timeout: .nanoseconds(Int64(request.timeout.seconds * 1e9)))
        let body = try await response.body.collect(upTo: Self.maxResponseBytes)
        return TransportResponse(status: Int(response.status.code), body: Data(body.readableBytesView))
    }
}
