import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// An MPD's XML as a tree of elements, read by Foundation's `XMLParser` under the limits a
/// manifest from an origin the SDK does not control must keep: a document type declaration (the
/// only place entities are declared, so "billion laughs" and external entities) is refused
/// before the parser sees the bytes; so is anything but UTF-8, more than `maxElements`
/// elements, nesting deeper than `maxDepth`, or an element's text longer than `maxText`.
struct MPDElement: Equatable, Sendable {
    /// The element's name without its namespace prefix (`pssh` for `cenc:pssh`).
    var name: String
    /// The name as written, prefix included, to write the element back.
    var qualifiedName: String
    /// As written, prefixes included (`cenc:default_KID`).
    var attributes: [String: String]
    var children: [MPDElement]
    /// The element's own text, trimmed of white space.
    var text: String

    /// The first child named `name`.
    func child(_ name: String) -> MPDElement? { children.first { $0.name == name } }

    func children(_ name: String) -> [MPDElement] { children.filter { $0.name == name } }

    /// An attribute by its name without prefix (`default_KID` finds `cenc:default_KID`).
    func attribute(localName: String) -> String? {
        if let value = attributes[localName] { return value }
        return attributes.first { $0.key.split(separator: ":").last.map(String.init) == localName }?.value
    }
}

/// Why an MPD cannot be used. Each is fatal for the asset: fetching it again gives the same.
struct MPDError: Error, Equatable, Sendable, CustomStringConvertible {
    var message: String
    init(_ message: String) { self.message = message }
    var description: String { "Unusable DASH manifest: \(message)." }
}

enum MPDDocument {
    /// Largest MPD read: 16 MiB, as for an HLS playlist (`HLSPlaylist.maxBytes`).
    static let maxBytes = 16 << 20
    /// Elements in one MPD: a ten-hour title in 2-second segments listed one by one
    /// (`SegmentList`) is 18,000 per Representation.
    static let maxElements = 250_000
    /// An MPD nests about seven deep (MPD, Period, AdaptationSet, Representation,
    /// SegmentTemplate, SegmentTimeline, S).
    static let maxDepth = 24
    /// Longest text of one element (a `BaseURL`, a `pssh`).
    static let maxText = 64 * 1024
    /// Longest URL a manifest may make, template expanded.
    static let maxURLLength = 4096
    /// Most bytes of URLs one track's segments may take: templates are expanded once per
    /// segment, so a long one (its attribute is not bounded as text is) times a long timeline
    /// must not take the app's memory.
    static let maxTrackURLBytes = 16 << 20

    /// The root element of `data`, which must be `MPD`.
    static func parse(_ data: Data) throws(MPDError) -> MPDElement {
        let root = try parseXML(data)
        guard root.name == "MPD" else { throw MPDError("its root element is \(root.qualifiedName.prefix(80)), not MPD") }
        return root
    }

    /// The root element of any XML document read under these limits (a Smooth Streaming
    /// manifest, a PlayReady header are read so too).
    static func parseXML(_ data: Data) throws(MPDError) -> MPDElement {
        guard data.count <= maxBytes else { throw MPDError("it is larger than \(maxBytes) bytes") }
        // Checked on the bytes the parser will read: as UTF-8 (an encoding declared otherwise is
        // refused by the parser's own check of the declaration against the bytes).
        guard String(data: data, encoding: .utf8) != nil else { throw MPDError("it is not UTF-8 text") }
        if data.range(of: Data("<!DOCTYPE".utf8)) != nil || data.range(of: Data("<!ENTITY".utf8)) != nil {
            throw MPDError("it has a document type declaration, which an MPD never needs (entities are refused)")
        }
        // Processing instructions, which an MPD never needs either: FoundationXML (Swift 6.3)
        // reads past a null pointer on one without data (`<?x?>`) and crashes the process. Only
        // the XML declaration at the very start is let through.
        if hasProcessingInstruction(data) { throw MPDError("it has a processing instruction, which an MPD never needs") }
        let builder = TreeBuilder()
        let parser = XMLParser(data: data)
        parser.shouldResolveExternalEntities = false
        parser.shouldProcessNamespaces = false
        parser.shouldReportNamespacePrefixes = false
        parser.delegate = builder
        let parsed = parser.parse()
        if let refusal = builder.refusal { throw refusal }
        guard parsed, let root = builder.root else {
            let reason = parser.parserError.map { "\($0.localizedDescription)" } ?? "it is not well-formed XML"
            throw MPDError("it is not well-formed XML (line \(parser.lineNumber): \(reason.prefix(200)))")
        }
        return root
    }

    /// Whether `data` holds `<?` anywhere but in an XML declaration at its very start (after a
    /// UTF-8 byte order mark, if any). One pass over the bytes.
    static func hasProcessingInstruction(_ data: Data) -> Bool {
        data.withUnsafeBytes { raw in
            let bytes = raw.bindMemory(to: UInt8.self)
            var index = bytes.count >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF ? 3 : 0
            // `<?xml` and white space: the declaration, whose own `?>` ends it.
            if bytes.count >= index + 6, Array(bytes[index..<(index + 5)]) == Array("<?xml".utf8),
               [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index + 5]) {
                index += 5
            }
            while index + 1 < bytes.count {
                if bytes[index] == UInt8(ascii: "<"), bytes[index + 1] == UInt8(ascii: "?") { return true }
                index += 1
            }
            return false
        }
    }

    /// Collects the elements as the parser reports them, refusing past the limits.
    private final class TreeBuilder: NSObject, XMLParserDelegate {
        var stack: [MPDElement] = []
        var root: MPDElement?
        var count = 0
        var refusal: MPDError?

        private func refuse(_ parser: XMLParser, _ why: String) {
            if refusal == nil { refusal = MPDError(why) }
            parser.abortParsing()
        }

        func parser(
            _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName qName: String?,
            attributes attributeDict: [String: String] = [:]
        ) {
            guard refusal == nil else { return }
            count += 1
            guard count <= MPDDocument.maxElements else { return refuse(parser, "it has more than \(MPDDocument.maxElements) elements") }
            guard stack.count < MPDDocument.maxDepth else { return refuse(parser, "its elements nest deeper than \(MPDDocument.maxDepth)") }
            guard root == nil else { return refuse(parser, "it has more than one root element") }
            let local = elementName.split(separator: ":").last.map(String.init) ?? elementName
            stack.append(MPDElement(name: local, qualifiedName: elementName, attributes: attributeDict, children: [], text: ""))
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            guard refusal == nil, !stack.isEmpty else { return }
            guard stack[stack.count - 1].text.utf8.count + string.utf8.count <= MPDDocument.maxText else {
                return refuse(parser, "an element's text is longer than \(MPDDocument.maxText) bytes")
            }
            stack[stack.count - 1].text += string
        }

        func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName qName: String?) {
            guard refusal == nil, var element = stack.popLast() else { return }
            element.text = element.text.trimmingCharacters(in: .whitespacesAndNewlines)
            if stack.isEmpty {
                root = element
            } else {
                stack[stack.count - 1].children.append(element)
            }
        }

        func parser(_ parser: XMLParser, foundInternalEntityDeclarationWithName name: String, value: String?) {
            refuse(parser, "it declares entities")
        }

        func parser(_ parser: XMLParser, foundExternalEntityDeclarationWithName name: String, publicID: String?, systemID: String?) {
            refuse(parser, "it declares entities")
        }

        func parser(_ parser: XMLParser, resolveExternalEntityName name: String, systemID: String?) -> Data? {
            refuse(parser, "it refers to an external entity")
            return nil
        }
    }
}

extension MPDElement {
    /// The element as XML, to keep it in a local MPD (`ContentProtection`, `Role`, …): names as
    /// they were written, attributes in a stable order, text and values escaped.
    func xml(indent: String) -> String {
        var line = "\(indent)<\(qualifiedName)\(MPDElement.attributeText(attributes))"
        if children.isEmpty && text.isEmpty { return line + "/>" }
        line += ">" + MPDElement.escaped(text)
        if children.isEmpty { return line + "</\(qualifiedName)>" }
        return ([line] + children.map { $0.xml(indent: indent + "  ") } + ["\(indent)</\(qualifiedName)>"]).joined(separator: "\n")
    }

    /// ` name="value"` for each attribute, namespace declarations first, then by name.
    static func attributeText(_ attributes: [String: String]) -> String {
        attributes.sorted { ($0.key.hasPrefix("xmlns") ? 0 : 1, $0.key) < ($1.key.hasPrefix("xmlns") ? 0 : 1, $1.key) }
            .map { " \($0.key)=\"\(escaped($0.value))\"" }.joined()
    }

    static func escaped(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            default: out.append(character)
            }
        }
        return out
    }
}
