package client_test

import "syscall"

// childAttr kills a server the tests started if the test binary dies
// first (a panic, a timeout), so none outlives the run.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
