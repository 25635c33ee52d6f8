package edge

// MaxHeaderBytes bounds what a client may send as headers before its
// request is read (16 KiB): the HTTP door's request line and headers, the
// gRPC door's metadata (HTTP/2 header list, RFC 9113 counting, 32 bytes
// per field more than its name and value). Large enough for any token and
// any proxy's tracing headers, small enough that a connection cannot make
// the door buffer megabytes before its password is checked.
const MaxHeaderBytes = 16 << 10

// DefaultMaxKeyBytes is every door's default bound on a key, in bytes.
const DefaultMaxKeyBytes = 1024

// DefaultMaxConnections is every door's default bound on the connections
// served at once (RESP's --max-clients).
const DefaultMaxConnections = 10000
