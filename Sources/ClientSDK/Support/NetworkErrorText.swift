import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import NIOSSL

/// What the network did, as one clean clause for a message ("the connection was refused"),
/// instead of the libraries' own texts ("connection reset (error set): Connection refused
/// (errno: 111)"), which an app would show its users or a script its operator. The error itself
/// stays in `BackplaneClientError.underlying` for whoever needs its detail.
enum NetworkErrorText {
    /// The other end was reached, or tried, and did not answer in time.
    static func isTimeout(_ error: any Error) -> Bool {
        switch error {
        case let error as HTTPClientError:
            [.connectTimeout, .readTimeout, .deadlineExceeded, .tlsHandshakeTimeout].contains(error)
        case let error as IOError: error.errnoCode == ETIMEDOUT
        case let error as ChannelError:
            if case .connectTimeout = error { true } else { false }
        case let error as NIOConnectionError: error.connectionErrors.contains { isTimeout($0.error) }
        default: false
        }
    }

    /// A clause for `error`, e.g. "the connection was refused"; never the libraries' raw text
    /// but for an error none of these is (then its type's name, which is stable and short).
    static func clause(_ error: any Error) -> String {
        if isTimeout(error) { return "it did not answer in time (timed out)" }
        switch error {
        case let error as IOError: return clause(errno: error.errnoCode)
        case let error as NIOConnectionError:
            if error.dnsAError != nil, error.dnsAAAAError != nil, error.connectionErrors.isEmpty {
                return "its host name \(error.host) could not be resolved"
            }
            return error.connectionErrors.first.map { clause($0.error) } ?? "it could not be connected to"
        case let error as HTTPClientError:
            switch error {
            case .remoteConnectionClosed: return "the connection was closed before an answer came"
            case .cancelled: return "the request was cancelled"
            default: return "the HTTP exchange failed (\(error))"
            }
        case is NIOSSLError, is BoringSSLError: return "the TLS handshake failed (its certificate is not trusted, or TLS is not spoken there)"
        case let error as ChannelError where error == .ioOnClosedChannel || error == .eof:
            return "the connection was closed before an answer came"
        default:
            return "a network error (\(type(of: error)))"
        }
    }

    static func clause(errno: Int32) -> String {
        switch errno {
        case ECONNREFUSED: "the connection was refused (nothing listens there)"
        case ECONNRESET: "the connection was reset"
        case EPIPE: "the connection was closed before an answer came"
        case ENETUNREACH, EHOSTUNREACH: "the network or the host is unreachable"
        case ETIMEDOUT: "it did not answer in time (timed out)"
        default: "a network error (errno \(errno))"
        }
    }
}
