//go:build linux

package bench

import "syscall"

// childAttr makes the kernel kill a child of ours if this process dies
// first, so an interrupted benchmark leaves nothing running.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
