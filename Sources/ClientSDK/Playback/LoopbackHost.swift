import NIOHTTP1

/// The `Host` a request to the playback server must name: the loopback address or `localhost`,
/// with the port the connection came in on. A web page that rebinds its own domain name to
/// 127.0.0.1 (DNS rebinding) reaches the port, but its browser sends the page's name as `Host`:
/// such a request is refused before its path is looked at. A host without a port is taken too
/// (it would mean port 80, where no rebinding page can reach this server), and so is an HTTP/1.0
/// request with no `Host` (browsers always send one).
enum LoopbackHost: Equatable {
    case accepted
    /// An HTTP/1.1 request without `Host`, or with several: 400, as RFC 9112 §3.2 asks.
    case invalid
    /// Another host or port: 421 Misdirected Request.
    case foreign

    static let names: Set<String> = ["127.0.0.1", "localhost"]

    init(_ head: HTTPRequestHead, port: Int?) {
        let hosts = head.headers[canonicalForm: "host"]
        guard hosts.count <= 1 else {
            self = .invalid
            return
        }
        guard let host = hosts.first else {
            self = head.version.major == 1 && head.version.minor == 0 ? .accepted : .invalid
            return
        }
        let value = host.lowercased()
        let name: Substring, stated: Substring?
        if let colon = value.lastIndex(of: ":") {
            name = value[..<colon]
            stated = value[value.index(after: colon)...]
        } else {
            name = value[...]
            stated = nil
        }
        guard Self.names.contains(String(name)) else {
            self = .foreign
            return
        }
        if let stated {
            guard let port, stated.allSatisfy(\.isASCIIDigit), Int(stated) == port else {
                self = .foreign
                return
            }
        }
        self = .accepted
    }
}

private extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}
