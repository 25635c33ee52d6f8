//go:build unix

package localredis

import "syscall"

const (
	sigStop = syscall.SIGSTOP
	sigCont = syscall.SIGCONT
	sigTerm = syscall.SIGTERM
	sigKill = syscall.SIGKILL
)

func signalPid(pid int, sig syscall.Signal) error { return syscall.Kill(pid, sig) }

// sysProcAttr keeps a detached server out of our session; an attached one
// stays in a process group of its own (attached says how it dies with us).
func sysProcAttr(detach bool) *syscall.SysProcAttr {
	if detach {
		return &syscall.SysProcAttr{Setsid: true}
	}
	return attached()
}
