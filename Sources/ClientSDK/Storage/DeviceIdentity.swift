import Foundation

/// Where the device's identity lives: its id and its device key (a P-256 private key, which
/// proves to the backplane that a later registration of the id comes from this install). Keep
/// both in the same place, so they survive or vanish together: the default is files in the data
/// directory; an app on Apple platforms can supply a Keychain-backed store so the identity
/// survives reinstalls. A store that kept the id but lost the key cannot register the id again
/// (409 `device_already_registered`) until an admin releases it.
public protocol DeviceIdentityStore: Sendable {
    func loadDeviceId() throws -> String?
    func saveDeviceId(_ deviceId: String) throws
    /// The device key's raw representation (32 bytes), or nil before the first start.
    func loadDeviceKey() throws -> Data?
    func saveDeviceKey(_ key: Data) throws
}

/// Keeps the device id in `device-id` and the device key in `device-key` inside a directory,
/// written atomically; the key file is readable by its owner only.
public struct FileDeviceIdentityStore: DeviceIdentityStore {
    public let file: URL
    public let keyFile: URL

    public init(directory: URL) {
        self.file = directory.appendingPathComponent("device-id")
        self.keyFile = directory.appendingPathComponent("device-key")
    }

    public func loadDeviceId() throws -> String? {
        guard FileManager.default.fileExists(atPath: file.path) else { return nil }
        let text = try String(contentsOf: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? nil : text
    }

    public func saveDeviceId(_ deviceId: String) throws {
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(deviceId.utf8).write(to: file, options: .atomic)
    }

    public func loadDeviceKey() throws -> Data? {
        guard FileManager.default.fileExists(atPath: keyFile.path) else { return nil }
        let data = try Data(contentsOf: keyFile)
        return data.isEmpty ? nil : data
    }

    public func saveDeviceKey(_ key: Data) throws {
        try Self.writeOwnerOnly(key, to: keyFile)
    }

    /// Writes `data` to `file` atomically, owner-only from the start: a key never exists on
    /// disk readable by others.
    static func writeOwnerOnly(_ data: Data, to file: URL) throws {
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        let temporary = file.appendingPathExtension("tmp-\(UUID().uuidString)")
        guard FileManager.default.createFile(atPath: temporary.path, contents: data, attributes: [.posixPermissions: 0o600]) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: temporary.path])
        }
        if FileManager.default.fileExists(atPath: file.path) {
            _ = try FileManager.default.replaceItemAt(file, withItemAt: temporary)
        } else {
            try FileManager.default.moveItem(at: temporary, to: file)
        }
    }
}
