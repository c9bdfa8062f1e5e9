import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A plain TCP connection to a local port, for sending what no HTTP client would: oversized or
/// trickled request heads, hand-made WebSocket upgrades and frames. Every call waits on a thread
/// of its own, not on the Swift concurrency pool (a blocked pool thread could be the one the
/// server under test needs to answer) nor on GCD's global queue, whose few threads on Linux one
/// test's forty blocked reads would take from every other test's. Used by one task at a time.
public final class RawConnection: @unchecked Sendable {
    private let socketDescriptor: Int32
    private var isOpen = true
    /// When bytes last arrived, and the longest this side then took to send again: how long it
    /// kept the server waiting for its next request, as the server's idle timer sees it.
    private var lastReceived: ContinuousClock.Instant?
    public private(set) var longestPauseBeforeSending: Duration = .zero

    public init(port: Int) throws {
        #if canImport(Glibc)
        socketDescriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        socketDescriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard socketDescriptor >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socketDescriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(socketDescriptor)
            throw POSIXError(.ECONNREFUSED)
        }
    }

    /// Connects and sends `first` at once, on this thread: no scheduling gap between the two for
    /// a server's request-head timer to fall into when the machine is loaded.
    public convenience init(port: Int, sending first: Data) throws {
        try self.init(port: port)
        guard sendNow(first) else { throw POSIXError(.EPIPE) }
    }

    public convenience init(port: Int, sending first: String) throws {
        try self.init(port: port, sending: Data(first.utf8))
    }

    deinit { disconnect() }

    /// Closes the connection from this side.
    public func disconnect() {
        guard isOpen else { return }
        isOpen = false
        close(socketDescriptor)
    }

    /// Sends every byte; false once the peer has closed the connection.
    @discardableResult
    public func send(_ data: Data) async -> Bool { await offload { self.sendNow(data) } }

    @discardableResult
    public func send(_ text: String) async -> Bool { await send(Data(text.utf8)) }

    /// Waits up to `timeout` for bytes.
    public func read(timeout: TimeInterval) async -> ReadResult { await offload { self.readNow(timeout: timeout) } }

    /// Everything the peer sends until it closes the connection or `timeout` passes without bytes.
    public func readUntilClosed(timeout: TimeInterval) async -> (data: Data, closed: Bool) {
        await offload { self.readUntilClosedNow(timeout: timeout) }
    }

    /// One HTTP/1.1 response read to the end of its `Content-Length` body: status, lower-cased
    /// header names, body. Nil when the connection closed or stalled first.
    public func readResponse(timeout: TimeInterval) async -> (status: Int, headers: [String: String], body: Data)? {
        await offload { self.readResponseNow(timeout: timeout) }
    }

    private func offload<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: work()) }.start()
        }
    }

    /// Runs `body` on a thread of its own, which sends, reads and pauses synchronously. A
    /// conversation timed against a server's limits must not wait on a pool: under a loaded test
    /// run the Swift concurrency pool (two threads here) resumes a task seconds late, and a
    /// client meant to pause 500 ms between requests then idles past the server's limit.
    public func converse<T: Sendable>(_ body: @escaping @Sendable (Conversation) -> T) async -> T {
        await withCheckedContinuation { continuation in
            let thread = Thread { continuation.resume(returning: body(Conversation(connection: self))) }
            thread.start()
        }
    }

    /// The connection's calls, made on the calling thread (see `converse`).
    public struct Conversation: Sendable {
        let connection: RawConnection

        @discardableResult
        public func send(_ text: String) -> Bool { connection.sendNow(Data(text.utf8)) }

        public func readResponse(timeout: TimeInterval) -> (status: Int, headers: [String: String], body: Data)? {
            connection.readResponseNow(timeout: timeout)
        }

        public func pause(_ duration: Duration) {
            let (seconds, attoseconds) = duration.components
            Thread.sleep(forTimeInterval: Double(seconds) + Double(attoseconds) / 1e18)
        }
    }

    private func sendNow(_ data: Data) -> Bool {
        if let lastReceived {
            longestPauseBeforeSending = max(longestPauseBeforeSending, ContinuousClock.now - lastReceived)
            self.lastReceived = nil
        }
        return data.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                #if canImport(Glibc)
                let sent = Glibc.send(socketDescriptor, buffer.baseAddress! + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
                #else
                let sent = Darwin.send(socketDescriptor, buffer.baseAddress! + offset, buffer.count - offset, 0)
                #endif
                if sent <= 0 { return false }
                offset += sent
            }
            return true
        }
    }

    public enum ReadResult: Equatable, Sendable {
        case data(Data)
        /// The peer closed the connection.
        case closed
        /// Nothing arrived within the timeout.
        case timedOut
    }

    private func readNow(timeout: TimeInterval) -> ReadResult {
        var descriptor = pollfd(fd: socketDescriptor, events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, Int32(timeout * 1000))
        guard ready > 0 else { return .timedOut }
        var buffer = [UInt8](repeating: 0, count: 65536)
        let count = recv(socketDescriptor, &buffer, buffer.count, 0)
        guard count > 0 else { return .closed }
        lastReceived = ContinuousClock.now
        return .data(Data(buffer.prefix(count)))
    }

    private func readUntilClosedNow(timeout: TimeInterval) -> (data: Data, closed: Bool) {
        var all = Data()
        while true {
            switch readNow(timeout: timeout) {
            case .data(let data): all += data
            case .closed: return (all, true)
            case .timedOut: return (all, false)
            }
        }
    }

    private func readResponseNow(timeout: TimeInterval) -> (status: Int, headers: [String: String], body: Data)? {
        var received = Data()
        let separator = Data("\r\n\r\n".utf8)
        while true {
            if let end = received.range(of: separator) {
                let head = String(decoding: received[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
                let parts = head[0].split(separator: " ")
                guard parts.count >= 2, let status = Int(parts[1]) else { return nil }
                var headers: [String: String] = [:]
                for line in head.dropFirst() {
                    guard let colon = line.firstIndex(of: ":") else { continue }
                    headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                }
                let length = Int(headers["content-length"] ?? "0") ?? 0
                var body = Data(received[end.upperBound...])
                while body.count < length {
                    guard case .data(let more) = readNow(timeout: timeout) else { return nil }
                    body += more
                }
                // After a 101 the rest belongs to the new protocol (a channel's first frame).
                return (status, headers, status == 101 ? body : body.prefix(length))
            }
            guard case .data(let more) = readNow(timeout: timeout) else { return nil }
            received += more
        }
    }
}
