import Foundation

extension Duration {
    /// The duration in seconds, for `Date` arithmetic. `package`: for this package's targets,
    /// not added to the apps' view of `Duration`.
    package var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
