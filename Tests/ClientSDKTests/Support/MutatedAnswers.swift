import ClientSDK
import Foundation

// The mutations MutatedAnswerTests replays in place of real answers.

/// One hostile variant of an answer body.
struct Mutation {
    var name: String
    /// Made when asked for: counting the mutations, or holding thousands of them at once
    /// (some are megabytes), should not cost their bodies.
    private let makeBody: () -> Data
    var body: Data { makeBody() }

    init(name: String, body: @autoclosure @escaping () -> Data) {
        self.name = name
        self.makeBody = body
    }

    /// Whole-body damage, then every part of the JSON replaced, removed, emptied or multiplied.
    static func all(of body: Data) -> [Mutation] {
        var mutations = wholeBody(body)
        guard let json = try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed]) else { return mutations }
        for path in paths(in: json) {
            for (name, value) in replacements {
                mutations.append(Mutation(name: "\(path.display) = \(name)", body: encode(replacing(path, in: json, with: .value(value)))))
            }
            mutations.append(Mutation(name: "\(path.display) removed", body: encode(replacing(path, in: json, with: .removed))))
        }
        for path in containerPaths(in: json) {
            mutations.append(Mutation(name: "\(path.display) emptied", body: encode(replacing(path, in: json, with: .emptied))))
            mutations.append(Mutation(name: "\(path.display) multiplied", body: encode(replacing(path, in: json, with: .multiplied))))
        }
        return mutations
    }

    private static func wholeBody(_ body: Data) -> [Mutation] {
        [
            Mutation(name: "empty body", body: Data()),
            Mutation(name: "null", body: Data("null".utf8)),
            Mutation(name: "an array", body: Data("[]".utf8)),
            Mutation(name: "an empty object", body: Data("{}".utf8)),
            Mutation(name: "truncated", body: body.prefix(body.count / 2)),
            Mutation(name: "invalid UTF-8", body: Data([0x7B, 0x22, 0xFF, 0xFE, 0x22, 0x3A, 0x31, 0x7D])),
            Mutation(name: "nested 100 000 deep", body: Data((String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)).utf8)),
            Mutation(name: "nested objects 100 000 deep", body: Data(String(repeating: #"{"a":"#, count: 100_000).utf8)),
            Mutation(name: "4 MiB of whitespace then the answer", body: Data(repeating: 0x20, count: 4 << 20) + body),
            Mutation(name: "a duplicate key", body: Data("{\"device\":1,".utf8) + body.dropFirst()),
        ]
    }

    /// What a leaf becomes: extreme and fractional numbers, dates outside any sane range, empty,
    /// huge and control-character strings, and every other JSON type.
    private static var replacements: [(String, Any)] { [
        ("Int64.max", NSNumber(value: Int64.max)),
        ("Int64.min", NSNumber(value: Int64.min)),
        ("1e308", NSNumber(value: 1e308)),
        ("-1", NSNumber(value: -1)),
        ("0.5", NSNumber(value: 0.5)),
        ("empty string", ""),
        ("70 000 characters", String(repeating: "x", count: 70_000)),
        ("year 9999", "9999-12-31T23:59:59Z"),
        ("year 1", "0001-01-01T00:00:00Z"),
        ("NUL and a path", "\u{0}../../etc/passwd"),
        ("null", NSNull()),
        ("true", true),
        ("[]", [Any]()),
        ("{}", [String: Any]()),
    ] }

    // MARK: JSON paths

    enum Step: CustomStringConvertible {
        case key(String), index(Int)
        var description: String {
            switch self {
            case .key(let key): ".\(key)"
            case .index(let index): "[\(index)]"
            }
        }
    }

    struct Path {
        var steps: [Step]
        var display: String { steps.isEmpty ? "(root)" : steps.map(\.description).joined() }
    }

    /// Every leaf and every container below the root (containers can be replaced too).
    private static func paths(in json: Any, prefix: [Step] = []) -> [Path] {
        var found: [Path] = []
        if let object = json as? [String: Any] {
            for key in object.keys.sorted() {
                found.append(Path(steps: prefix + [.key(key)]))
                found += paths(in: object[key]!, prefix: prefix + [.key(key)])
            }
        } else if let array = json as? [Any] {
            for (index, element) in array.enumerated() {
                found.append(Path(steps: prefix + [.index(index)]))
                found += paths(in: element, prefix: prefix + [.index(index)])
            }
        }
        return found
    }

    /// The root and every array or object inside it.
    private static func containerPaths(in json: Any, prefix: [Step] = []) -> [Path] {
        var found: [Path] = []
        if let object = json as? [String: Any] {
            found.append(Path(steps: prefix))
            for key in object.keys.sorted() { found += containerPaths(in: object[key]!, prefix: prefix + [.key(key)]) }
        } else if let array = json as? [Any] {
            found.append(Path(steps: prefix))
            for (index, element) in array.enumerated() { found += containerPaths(in: element, prefix: prefix + [.index(index)]) }
        }
        return found
    }

    enum Change { case value(Any), removed, emptied, multiplied }

    private static func replacing(_ path: Path, in json: Any, with change: Change) -> Any {
        replacing(path.steps[...], in: json, with: change) ?? NSNull()
    }

    /// `nil` means "remove this part".
    private static func replacing(_ steps: ArraySlice<Step>, in json: Any, with change: Change) -> Any? {
        guard let step = steps.first else {
            switch change {
            case .value(let value): return value
            case .removed: return nil
            case .emptied: return json is [Any] ? [Any]() : [String: Any]()
            case .multiplied:
                if let array = json as? [Any], let first = array.first { return array + Array(repeating: first, count: 500) }
                if let object = json as? [String: Any] {
                    // The same object repeated as an array: a wrong shape of plausible size.
                    return Array(repeating: object as Any, count: 500)
                }
                return json
            }
        }
        switch step {
        case .key(let key):
            var object = json as! [String: Any]
            object[key] = replacing(steps.dropFirst(), in: object[key]!, with: change)
            return object
        case .index(let index):
            var array = json as! [Any]
            if let replaced = replacing(steps.dropFirst(), in: array[index], with: change) {
                array[index] = replaced
            } else {
                array.remove(at: index)
            }
            return array
        }
    }

    private static func encode(_ json: Any) -> Data {
        (try? JSONSerialization.data(withJSONObject: json, options: [.fragmentsAllowed])) ?? Data("null".utf8)
    }
}
