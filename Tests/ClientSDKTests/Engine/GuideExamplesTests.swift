import Foundation
import Testing
import TestSupport

/// The SDK guide's code blocks are compiled as the `SDKGuideExamples` target; this makes sure the
/// guide shows exactly what compiles there, so neither can change without the other.
@Suite struct GuideExamplesTests {
    private static let root = BuiltProduct.packageRoot

    /// The lines that matter: trimmed, blank ones dropped.
    private static func lines(_ text: some StringProtocol) -> [String] {
        text.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
    }

    private static func swiftBlocks(in markdown: String) -> [String] {
        var blocks: [String] = [], current: [Substring]?
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line.hasPrefix("```swift") {
                current = []
            } else if current != nil, line.hasPrefix("```") {
                blocks.append(current!.joined(separator: "\n"))
                current = nil
            } else {
                current?.append(line)
            }
        }
        return blocks
    }

    @Test func everyCodeBlockOfTheSDKGuideIsInTheCompiledExamples() throws {
        let guide = try String(contentsOf: Self.root.appendingPathComponent("docs/sdk.md"), encoding: .utf8)
        let examples = Self.lines(try String(contentsOf: Self.root.appendingPathComponent("Examples/SDKGuide/main.swift"), encoding: .utf8))
        // The manifest snippet belongs in an app's Package.swift, not in Swift code.
        let blocks = Self.swiftBlocks(in: guide).filter { !$0.contains(".package(url:") }
        #expect(blocks.count >= 8, "the guide's Swift blocks were not found")
        for block in blocks {
            let wanted = Self.lines(block)
            let found = examples.indices.contains { start in
                examples[start...].starts(with: wanted)
            }
            #expect(found, "Examples/SDKGuide/main.swift does not contain this block of docs/sdk.md:\n\(block)")
        }
    }

    /// An app needs `import ClientSDK` and nothing else (Foundation aside, and the platform's own
    /// player where an example plays): the examples import nothing more of ours, and still compile.
    @Test func theExamplesImportOnlyClientSDK() throws {
        let directory = Self.root.appendingPathComponent("Examples/SDKGuide")
        for file in try FileManager.default.contentsOfDirectory(atPath: directory.path) where file.hasSuffix(".swift") {
            let imports = Self.lines(try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8))
                .filter { $0.hasPrefix("import ") }
            #expect(Set(imports).isSubset(of: ["import ClientSDK", "import Foundation", "import AVKit"]), "\(file) imports \(imports)")
        }
    }
}
