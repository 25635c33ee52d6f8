package localredis

// Unexported helpers for the external tests (package localredis_test, which
// can use redistest's NewCluster without an import cycle).
var (
	ParseInfo     = parseInfo
	FreePorts     = freePorts
	Listen        = listen
	BusPortOffset = busPortOffset
	ServerPid     = serverPid
	ReadProc      = readProc
	WriteState    = writeState
)

// Ours reports whether sn's pid is still the server that Up started.
func (sn StateNode) Ours() bool { return sn.ours() }

// ProcStart is the start time of a process, as a state file records it.
func ProcStart(p procInfo) string { return p.start }

// ProcZombie reports whether the process has exited but not been reaped.
func ProcZombie(p procInfo) bool { return p.zombie }
