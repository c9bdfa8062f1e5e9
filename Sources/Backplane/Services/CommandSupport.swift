import Foundation
import BackplaneWire

/// Which SDK versions can run each command type. A command type added after an SDK shipped
/// would reach that SDK as a type it does not know (it acknowledges it `failed`, reason
/// `unsupported`); when the backplane knows the device's SDK version (from its registration or
/// its latest sync) it does not send it at all: the command fails at once, at enqueue or at the
/// sync that would have delivered it, with the reason `unsupportedByDevice`. A device whose
/// version is unknown or unreadable gets every command.
public struct CommandSupport: Sendable {
    /// The first SDK version that runs each type; a type not listed runs on every SDK.
    public var firstSDKVersion: [CommandType: SDKVersion]

    public init(firstSDKVersion: [CommandType: SDKVersion]) {
        self.firstSDKVersion = firstSDKVersion
    }

    /// Every type of this release runs on every SDK released so far (0.1.0 had them all).
    public static let current = CommandSupport(firstSDKVersion: [:])

    /// The failure reason of a command a device's SDK cannot run.
    public static let unsupportedByDevice = "unsupportedByDevice"

    /// Whether a device on `sdkVersion` can run `type`: false only when both versions are known
    /// and the device's predates the type.
    public func supports(_ type: CommandType, onSDK sdkVersion: String?) -> Bool {
        guard let first = firstSDKVersion[type], let version = sdkVersion.flatMap(SDKVersion.init) else { return true }
        return version >= first
    }

    /// `command`, failed for its device's SDK, if that SDK cannot run it; otherwise unchanged.
    func refusing(_ command: CommandRecord, onSDK sdkVersion: String?, now: Date) -> CommandRecord {
        guard !command.state.isFinished, !supports(command.type, onSDK: sdkVersion) else { return command }
        var command = command
        command.state = .failed
        command.completedAt = now
        command.updatedAt = now
        command.failureReason = Self.unsupportedByDevice
        return command
    }
}

/// An SDK's version as it reports it: dot-separated numbers ("0.1.0", "2.10"), compared number
/// by number, with missing numbers as 0; anything after the numbers ("-beta.2", "+build") is
/// ignored. Text that does not start with a number is no version (the device gets every command).
public struct SDKVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let numbers: [Int]

    public init?(_ text: String) {
        let core = text.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
        let numbers = core.split(separator: ".", omittingEmptySubsequences: false).map { Int($0) }
        guard !numbers.isEmpty, numbers.count <= 8, numbers.allSatisfy({ $0 != nil }) else { return nil }
        self.numbers = numbers.compactMap { $0 }
    }

    public static func < (lhs: SDKVersion, rhs: SDKVersion) -> Bool {
        for index in 0..<max(lhs.numbers.count, rhs.numbers.count) {
            let left = index < lhs.numbers.count ? lhs.numbers[index] : 0
            let right = index < rhs.numbers.count ? rhs.numbers[index] : 0
            if left != right { return left < right }
        }
        return false
    }

    public static func == (lhs: SDKVersion, rhs: SDKVersion) -> Bool { !(lhs < rhs) && !(rhs < lhs) }

    public func hash(into hasher: inout Hasher) {
        var trimmed = numbers
        while trimmed.last == 0 { trimmed.removeLast() }
        hasher.combine(trimmed)
    }

    public var description: String { numbers.map(String.init).joined(separator: ".") }
}
