//go:build unix && !linux

package localredis

import (
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// attached is the SysProcAttr of a server that is not detached. Without
// Linux's Pdeathsig, it outlives a crashed test binary.
func attached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// readProc describes process pid with ps(1). ok is false when no such
// process exists.
func readProc(pid int) (p procInfo, ok bool, err error) {
	out, err := exec.Command("ps", "-o", "stat=,lstart=,command=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		if _, exit := err.(*exec.ExitError); exit {
			return procInfo{}, false, nil // ps exits 1 when pid is unknown
		}
		return procInfo{}, false, err
	}
	f := strings.Fields(string(out))
	if len(f) < 6 {
		return procInfo{}, false, nil
	}
	p.zombie = strings.HasPrefix(f[0], "Z")
	p.start = strings.Join(f[1:6], " ")
	p.cmdline = strings.Join(f[6:], " ")
	return p, true, nil
}
