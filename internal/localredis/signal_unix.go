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
