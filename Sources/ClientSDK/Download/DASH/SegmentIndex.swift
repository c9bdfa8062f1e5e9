import Foundation

/// An ISO BMFF segment index box (`sidx`, ISO/IEC 14496-12 §8.16.3): where each media segment of
/// a single-file Representation (`SegmentBase@indexRange`) lies, and how long it plays. Read from
/// bytes an origin sent: every size and offset is checked, and a box that claims more than it
/// holds is refused.
struct SegmentIndex: Equatable, Sendable {
    struct Reference: Equatable, Sendable {
        var range: ByteRange
        var duration: Int64
    }

    var timescale: Int64
    var earliestPresentationTime: Int64
    var references: [Reference]

    /// Finds the `sidx` among the boxes of `data`, which was fetched from `offset` in the file
    /// (the `indexRange`): the references' ranges are absolute in the file.
    static func parse(_ data: Data, at offset: Int64, maxReferences: Int) throws(MPDError) -> SegmentIndex {
        let bytes = [UInt8](data)
        var position = 0
        while position + 8 <= bytes.count {
            var size = Int64(read32(bytes, position))
            let type = String(decoding: bytes[(position + 4)..<(position + 8)], as: UTF8.self)
            var header = 8
            if size == 1 {
                guard position + 16 <= bytes.count else { break }
                let large = read64(bytes, position + 8)
                guard large <= UInt64(Int64.max) else { throw MPDError("a box in the index range claims more than 2^63 bytes") }
                size = Int64(large)
                header = 16
            } else if size == 0 {
                size = Int64(bytes.count - position)
            }
            guard size >= Int64(header), size <= Int64(bytes.count - position) else {
                throw MPDError("a \(type.debugDescription) box in the index range claims \(size) bytes, more than the range holds")
            }
            if type == "sidx" {
                let body = Array(bytes[(position + header)..<(position + Int(size))])
                let (anchor, overflow) = offset.addingReportingOverflow(Int64(position) + size)
                guard !overflow else { throw MPDError("the index range lies past 2^63") }
                return try parseBody(body, anchor: anchor, maxReferences: maxReferences)
            }
            position += Int(size)
        }
        throw MPDError("the index range holds no sidx box")
    }

    /// The box after its header; `anchor`: the file offset of the first byte after the box.
    private static func parseBody(_ body: [UInt8], anchor: Int64, maxReferences: Int) throws(MPDError) -> SegmentIndex {
        guard body.count >= 4 else { throw MPDError("a sidx box is too short") }
        let version = body[0]
        var position = 4 + 4 // version and flags, reference_ID
        let fixed = version == 0 ? 8 : 16
        guard body.count >= position + 4 + fixed + 4 else { throw MPDError("a sidx box is too short") }
        let timescale = Int64(read32(body, position))
        guard timescale > 0 else { throw MPDError("a sidx box's timescale is 0") }
        position += 4
        let earliest: UInt64
        let firstOffset: UInt64
        if version == 0 {
            earliest = UInt64(read32(body, position))
            firstOffset = UInt64(read32(body, position + 4))
        } else {
            earliest = read64(body, position)
            firstOffset = read64(body, position + 8)
        }
        position += fixed
        position += 2 // reserved
        let count = Int(UInt16(body[position]) << 8 | UInt16(body[position + 1]))
        position += 2
        guard count <= maxReferences else { throw MPDError("the sidx lists more than \(maxReferences) segments (the asset's budget)") }
        guard body.count >= position + count * 12 else { throw MPDError("a sidx box lists \(count) references but holds fewer") }
        guard earliest <= UInt64(1) << 62, firstOffset <= UInt64(1) << 62 else { throw MPDError("a sidx box's times or offsets pass 2^62") }
        let (first, overflow) = anchor.addingReportingOverflow(Int64(firstOffset))
        guard !overflow else { throw MPDError("the sidx's segments lie past 2^63") }
        var start = first
        var references: [Reference] = []
        references.reserveCapacity(count)
        for _ in 0..<count {
            let typeAndSize = read32(body, position)
            guard typeAndSize & 0x8000_0000 == 0 else {
                throw MPDError("the sidx refers to further sidx boxes (a hierarchical index), which the SDK does not read")
            }
            let size = Int64(typeAndSize & 0x7FFF_FFFF)
            let duration = Int64(read32(body, position + 4))
            guard size > 0 else { throw MPDError("a sidx reference of 0 bytes") }
            guard start <= Int64.max - size, let offset = Int(exactly: start), let length = Int(exactly: size) else {
                throw MPDError("the sidx's segments lie past what this device can address")
            }
            references.append(Reference(range: .init(length: length, offset: offset), duration: duration))
            start += size
            position += 12
        }
        guard !references.isEmpty else { throw MPDError("the sidx lists no segments") }
        return SegmentIndex(timescale: timescale, earliestPresentationTime: Int64(earliest), references: references)
    }

    private static func read32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
    }

    private static func read64(_ bytes: [UInt8], _ at: Int) -> UInt64 {
        UInt64(read32(bytes, at)) << 32 | UInt64(read32(bytes, at + 4))
    }
}
