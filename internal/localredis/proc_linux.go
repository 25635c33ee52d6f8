//go:build linux

package localredis

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// attached is the SysProcAttr of a server that is not detached: the
// kernel kills it when the thread that started it dies, so a crashed test
// binary leaves no server behind.
func attached() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// readProc describes process pid from /proc. ok is false when no such
// process exists.
func readProc(pid int) (p procInfo, ok bool, err error) {
	dir := "/proc/" + strconv.Itoa(pid)
	stat, err := os.ReadFile(dir + "/stat")
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return procInfo{}, false, nil
	}
	if err != nil {
		return procInfo{}, false, err
	}
	// pid (comm) state ppid … starttime is field 22; comm may hold spaces
	// and parentheses, so count from the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return procInfo{}, false, fmt.Errorf("localredis: cannot parse %s/stat", dir)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 20 {
		return procInfo{}, false, fmt.Errorf("localredis: cannot parse %s/stat", dir)
	}
	p.zombie = f[0] == "Z" || f[0] == "X"
	p.start = f[19]
	cmd, err := os.ReadFile(dir + "/cmdline")
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return procInfo{}, false, nil
	}
	if err != nil {
		return procInfo{}, false, err
	}
	p.cmdline = strings.TrimSpace(string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
	return p, true, nil
}
