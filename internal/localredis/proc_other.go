//go:build !unix

package localredis

import (
	"errors"
	"syscall"
)

// On systems without POSIX signals the package builds, so that a binary
// importing it builds too, but it cannot pause, resume or reap servers.

var errUnsupported = errors.New("localredis: not supported on this operating system")

const (
	sigStop = syscall.Signal(0x13)
	sigCont = syscall.Signal(0x12)
	sigTerm = syscall.SIGTERM
	sigKill = syscall.SIGKILL
)

func sysProcAttr(detach bool) *syscall.SysProcAttr { return nil }

func readProc(pid int) (procInfo, bool, error) { return procInfo{}, false, errUnsupported }

func signalPid(pid int, sig syscall.Signal) error { return errUnsupported }
