import Foundation
import NIOCore

/// On the playback server's listening channel: stops accepting for `pause` when the system
/// refuses the process a descriptor (`EMFILE`, `ENFILE`) or the memory for one, so the
/// connections waiting meanwhile stay in the listen backlog rather than the server spinning on
/// an `accept` that fails at once.
///
/// NIO's `AcceptBackoffHandler` does not do it with this NIO (2.101): a failed `accept` leaves
/// the channel's read pending, so the channel never asks the pipeline for the next read the
/// handler would delay, stays registered for readability, and the event loop calls `accept`
/// again at once (measured: a whole core). Turning `autoRead` off takes the channel out of the
/// selector; turning it back on after the pause accepts again.
final class AcceptPause: ChannelInboundHandler {
    typealias InboundIn = any Channel

    private let pause: TimeAmount
    private var paused = false

    init(pause: TimeAmount) {
        self.pause = pause
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let failure = error as? IOError, Self.waitsOut(failure) else { return context.fireErrorCaught(error) }
        // Another `accept` error (a client that reset its connection before it was accepted)
        // says nothing about the next one: pausing on it would let any app stall the server.
        guard !paused, let options = context.channel.syncOptions else { return }
        paused = true
        try? options.setOption(ChannelOptions.autoRead, value: false)
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let channel = context.channel
        context.eventLoop.scheduleTask(in: pause) { handler.value.resume(channel) }
    }

    private func resume(_ channel: any Channel) {
        paused = false
        // Fails only once the server is closed, when there is nothing left to accept.
        try? channel.syncOptions?.setOption(ChannelOptions.autoRead, value: true)
    }

    private static func waitsOut(_ failure: IOError) -> Bool {
        [EMFILE, ENFILE, ENOBUFS, ENOMEM].contains(failure.errnoCode)
    }
}
