import ArgumentParser
import Foundation

/// Options from the environment, for containers and service units where flags are awkward:
/// `--some-option` may be given as `BACKPLANE_SOME_OPTION`. A flag wins over the variable, the
/// variable over the default. A variable that does not parse stops the start with one line naming
/// it (its value is not repeated: it may be a secret).
enum Environment {
    static let prefix = "BACKPLANE_"

    /// `--max-header-bytes` → `BACKPLANE_MAX_HEADER_BYTES`.
    static func variable(for option: String) -> String {
        prefix + option.uppercased().replacingOccurrences(of: "-", with: "_")
    }

    /// The flag's value, else the variable's, else `fallback`.
    static func resolve<T: ExpressibleByArgument>(_ flag: T?, option: String, default fallback: T) throws -> T {
        if let flag { return flag }
        let name = variable(for: option)
        // Empty counts as unset, as shells and compose files write "unset" that way.
        guard let text = ProcessInfo.processInfo.environment[name], !text.isEmpty else { return fallback }
        guard let value = T(argument: text) else {
            throw ValidationError("\(name) is not a valid value for --\(option).")
        }
        return value
    }

    /// A string option that has no default: nil when neither the flag nor the variable is set. An
    /// empty variable counts as unset, as shells and compose files write "unset" that way.
    static func resolve(_ flag: String?, option: String) -> String? {
        if let flag { return flag }
        guard let text = ProcessInfo.processInfo.environment[variable(for: option)], !text.isEmpty else { return nil }
        return text
    }

    /// What the help of an option says about where its value may come from.
    static func help(_ text: String, option: String, default fallback: CustomStringConvertible? = nil) -> ArgumentHelp {
        // 20, not 20.0, for a whole-number rate.
        let shown = fallback.map { value in
            (value as? Double).flatMap { $0 == $0.rounded() && abs($0) < 1e15 ? String(Int($0)) : nil } ?? "\(value)"
        }
        let defaultText = shown.map { "default \($0); " } ?? ""
        return ArgumentHelp("\(text) (\(defaultText)env \(variable(for: option)))")
    }
}
