//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd || solaris || illumos

package cluster

import "syscall"

// peekable reports whether bytes wait to be read on raw's socket: a
// recvfrom with MSG_PEEK and MSG_DONTWAIT, through Control, which neither
// waits for the socket nor minds its deadline.
func peekable(raw syscall.RawConn) bool {
	waiting := false
	_ = raw.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		waiting = n > 0 && err == nil
	})
	return waiting
}
