import ArgumentParser
import ClientSDK
import Foundation

/// Calls `handler` once when one of `signals` arrives (instead of the default: dying).
final class SignalWatcher: @unchecked Sendable {
    private var sources: [any DispatchSourceSignal] = []

    init(signals: [Int32], handler: @escaping @Sendable () -> Void) {
        for number in signals {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler(handler: handler)
            source.resume()
            sources.append(source)
        }
    }

    func cancel() {
        sources.forEach { $0.cancel() }
    }
}
