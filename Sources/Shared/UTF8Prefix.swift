extension String {
    /// The longest prefix of at most `maxBytes` UTF-8 bytes that ends on a character boundary:
    /// how the SDK shortens text to a `WireLimits` limit, which counts bytes.
    public func prefix(utf8Bytes maxBytes: Int) -> String {
        guard utf8.count > maxBytes else { return self }
        var end = startIndex
        var used = 0
        for index in indices {
            let next = self.index(after: index)
            used += self[index..<next].utf8.count
            guard used <= maxBytes else { break }
            end = next
        }
        return String(self[..<end])
    }
}
