import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A port held by a socket bound to 127.0.0.1 and listening: taken, as by another process.
/// Closed, it is a port that was free a moment ago (`freePort()`).
public struct HeldPort {
    let descriptor: Int32
    public let port: Int

    public init() throws {
        (descriptor, port) = try boundSocket(listening: true)
    }

    public func close() { _ = Glibc.close(descriptor) }
}

/// A port nothing listens on now, for a server a test starts itself (nginx).
public func freePort() throws -> Int {
    let held = try HeldPort()
    defer { held.close() }
    return held.port
}

/// A port that refuses connections for as long as it is held: bound to 127.0.0.1 and not
/// listening, so that no other test's server can take it meanwhile (`freePort()` can be taken
/// between its answer and the connection a test means to see refused).
public struct RefusingPort {
    let descriptor: Int32
    public let port: Int

    public init() throws {
        (descriptor, port) = try boundSocket(listening: false)
    }

    public func close() { _ = Glibc.close(descriptor) }
}

/// A TCP socket bound to a free port of 127.0.0.1, listening or not; close-on-exec, so that a
/// child the test starts does not inherit the port.
private func boundSocket(listening: Bool) throws -> (descriptor: Int32, port: Int) {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard descriptor >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(descriptor, pointer, length) == 0 && (!listening || listen(descriptor, 1) == 0)
                && getsockname(descriptor, pointer, &length) == 0
        }
    }
    guard bound else {
        let reason = errno
        _ = Glibc.close(descriptor)
        throw POSIXError(.init(rawValue: reason) ?? .EIO)
    }
    return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
}
