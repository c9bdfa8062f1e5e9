// The local APNs and Google endpoints of the tests (TestSupport's PushRig: HTTP/2 over TLS,
// every provider token, assertion and bearer token checked), run as a process for
// benchmarks/push/run.sh:
//
//   PushBenchEndpoints CONFIG_OUT RESULTS_OUT EXPECTED TIMEOUT_SECONDS
//
// writes CONFIG_OUT (the URLs, the CA file and the credentials the endpoints trust) once they
// listen, then waits until EXPECTED pushes arrived (or the timeout), writing how many have in
// RESULTS_OUT.progress as they come, and writes RESULTS_OUT: each
// push's token with the wall-clock time it arrived, the connections each endpoint accepted and
// the requests they refused.
import BackplaneWire
import Foundation
import TestSupport

let arguments = CommandLine.arguments
guard arguments.count == 5, let expected = Int(arguments[3]), let timeout = Double(arguments[4]) else {
    FileHandle.standardError.write(Data("usage: PushBenchEndpoints CONFIG_OUT RESULTS_OUT EXPECTED TIMEOUT_SECONDS\n".utf8))
    exit(2)
}
let rig = try await PushRig.start()
let config: JSONValue = .object([
    "apnsUrl": .string(rig.apns.server.url.absoluteString),
    "fcmUrl": .string(rig.google.server.url.absoluteString),
    "googleTokenUrl": .string(rig.google.tokenURL.absoluteString),
    "caFile": .string(rig.certificates.authority.path),
    "apns": try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(rig.apnsCredentials)),
    "fcm": .object(["serviceAccount": rig.serviceAccount]),
])
try JSONEncoder().encode(config).write(to: URL(fileURLWithPath: arguments[1]))

let deadline = Date().addingTimeInterval(timeout)
let progress = URL(fileURLWithPath: arguments[2] + ".progress")
while rig.apns.pushes.count + rig.google.messages.count < expected, Date() < deadline {
    try Data("\(rig.apns.pushes.count + rig.google.messages.count)".utf8).write(to: progress, options: .atomic)
    try await Task.sleep(for: .milliseconds(50))
}
func milliseconds(_ date: Date) -> JSONValue { .int(Int64((date.timeIntervalSince1970 * 1000).rounded())) }
var received: [String: JSONValue] = [:]
for push in rig.apns.pushes { received[push.token] = milliseconds(push.receivedDate) }
for message in rig.google.messages { received[message.token] = milliseconds(message.receivedDate) }
let results: JSONValue = .object([
    "received": .object(received),
    "connections": .object(["apns": .int(Int64(rig.apns.server.connectionsAccepted)), "google": .int(Int64(rig.google.server.connectionsAccepted))]),
    "apnsRefusals": .int(Int64(rig.apns.refusals.count)),
    "grants": .int(Int64(rig.google.grantsIssued)),
])
try JSONEncoder().encode(results).write(to: URL(fileURLWithPath: arguments[2]))
await rig.stop()
