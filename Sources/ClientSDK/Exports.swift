// The wire types the SDK's API shows (Device, Episode, EventType, …) come with `import ClientSDK`:
// an app imports one module. `@_exported` is the compiler's long-standing way to do that; the
// module it brings, BackplaneWire, is the one the backplane speaks too.
@_exported import BackplaneWire
