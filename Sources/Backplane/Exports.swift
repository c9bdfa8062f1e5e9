// The wire types the server's API shows come with `import Backplane`, as they do for apps with
// `import ClientSDK`.
@_exported import BackplaneWire
