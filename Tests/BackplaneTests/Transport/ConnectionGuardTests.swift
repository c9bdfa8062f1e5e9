import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing
@testable import Backplane

/// The connection guard's deadlines, on a channel whose clock the test moves: what the
/// connection waits for decides which limit applies, whatever order requests and answers take.
@Suite struct ConnectionGuardTests {
    let limits = TransportLimits(requestHeadTimeout: .seconds(30), requestBodyTimeout: .seconds(60))

    func connection() throws -> EmbeddedChannel {
        let channel = EmbeddedChannel(handler: ConnectionGuard(limits: limits))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
        return channel
    }

    func request(_ channel: EmbeddedChannel, body: Bool = true, end: Bool = true) throws {
        try channel.writeInbound(HTTPServerRequestPart.head(HTTPRequestHead(version: .http1_1, method: .POST, uri: "/v1/sync")))
        if body { try channel.writeInbound(HTTPServerRequestPart.body(ByteBuffer(string: "{}"))) }
        if end { try channel.writeInbound(HTTPServerRequestPart.end(nil)) }
    }

    func answer(_ channel: EmbeddedChannel) throws {
        try channel.writeOutbound(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .notFound)))
        try channel.writeOutbound(HTTPServerResponsePart.end(nil))
    }

    func wait(_ channel: EmbeddedChannel, seconds: Int64) {
        channel.embeddedEventLoop.advanceTime(by: .seconds(seconds))
    }

    @Test func anIdleConnectionIsClosedAfterTheHeadLimitAndABusyOneIsNot() throws {
        let channel = try connection()
        for _ in 0..<10 {
            wait(channel, seconds: 20)
            try request(channel)
            try answer(channel)
        }
        #expect(channel.isActive, "ten requests 20 s apart: never 30 s idle")
        wait(channel, seconds: 29)
        #expect(channel.isActive)
        wait(channel, seconds: 2)
        #expect(!channel.isActive)
    }

    @Test func aRequestAnsweredBeforeItsBodyEndedIsClosedOnceIdle() throws {
        let channel = try connection()
        try request(channel, end: false)
        try answer(channel)  // say, a 404 that did not wait for the body
        wait(channel, seconds: 10)
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        wait(channel, seconds: 29)
        #expect(channel.isActive)
        wait(channel, seconds: 2)
        #expect(!channel.isActive, "an answered connection holding no request must not stay open")
    }

    @Test func aRouteThatTakesLongIsNotCutOffAndNeitherIsTheRequestReadAheadOfIt() throws {
        let channel = try connection()
        try request(channel)
        wait(channel, seconds: 120)
        #expect(channel.isActive, "a complete request being answered has no deadline")
        // The next request arrives before the first is answered; answering the first leaves
        // the second being worked on.
        try request(channel)
        try answer(channel)
        wait(channel, seconds: 120)
        #expect(channel.isActive)
        try answer(channel)
        wait(channel, seconds: 31)
        #expect(!channel.isActive)
    }

    @Test func aTrickledBodyHasOneDeadlineFromItsHead() throws {
        let channel = try connection()
        try request(channel, body: false, end: false)
        for _ in 0..<5 {
            wait(channel, seconds: 11)
            try? channel.writeInbound(HTTPServerRequestPart.body(ByteBuffer(string: "x")))
        }
        #expect(channel.isActive, "55 s into its body")
        wait(channel, seconds: 6)
        #expect(!channel.isActive, "the body's 60 s are up however it trickles")
    }
}
