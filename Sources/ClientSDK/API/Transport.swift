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

/// How the SDK talks HTTP. Throw for anything that is not an HTTP answer (no connection, timeout);
/// throw `ConnectionClosedError` when a connection closed under the request, and the SDK may send
/// it again.
public protocol Transport: Sendable {
    func send(_ request: TransportRequest) async throws -> TransportResponse
}

/// The connection closed under the request before any answer came: typically a kept-alive
/// connection that the backplane (restarted) or a proxy (idle timeout) had closed when the
/// request went out on it. The SDK signs the request again and sends it again (at most twice),
/// as its sync loop would after a backoff, unless a repeat of one that arrived would be refused
/// (unregistering, unsubscribing).
public struct ConnectionClosedError: Error {
    public var underlying: any Error

    public init(underlying: any Error) {
        self.underlying = underlying
    }
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
        let response: HTTPClientResponse
        do {
            response = try await client.execute(outgoing, timeout: .nanoseconds(Int64(request.timeout.seconds * 1e9)))
        } catch where Self.closedUnderTheRequest(error) {
            throw ConnectionClosedError(underlying: error)
        }
        let body = try await response.body.collect(upTo: Self.maxResponseBytes)
        return TransportResponse(status: Int(response.status.code), body: Data(body.readableBytesView))
    }

    /// What async-http-client and NIO throw when the other end closed or reset the connection.
    static func closedUnderTheRequest(_ error: any Error) -> Bool {
        switch error {
        case let error as HTTPClientError: error == .remoteConnectionClosed
        case let error as IOError: error.errnoCode == ECONNRESET || error.errnoCode == EPIPE
        case let error as ChannelError: error == .ioOnClosedChannel || error == .eof
        default: false
        }
    }
}
