package bench

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"
)

// ParseStat returns the CPU a process has used, utime + stime in clock
// ticks, from the text of /proc/<pid>/stat. The command name (field 2) may
// hold spaces and parentheses, so fields are counted from the last ')':
// utime and stime are fields 14 and 15 of proc(5).
func ParseStat(stat []byte) (uint64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("bench: /proc stat has no ')'")
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("bench: /proc stat has %d fields after the name, want at least 13", len(f))
	}
	utime, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bench: /proc stat utime %q: %w", f[11], err)
	}
	stime, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bench: /proc stat stime %q: %w", f[12], err)
	}
	return utime + stime, nil
}

// cpuTicks sums utime + stime over pids, all threads included.
func cpuTicks(pids []int) (uint64, error) {
	var sum uint64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return 0, fmt.Errorf("bench: pid %d: %w", pid, err)
		}
		t, err := ParseStat(b)
		if err != nil {
			return 0, fmt.Errorf("pid %d: %w", pid, err)
		}
		sum += t
	}
	return sum, nil
}

// procName is the command name of pid (/proc/<pid>/comm), "" if unknown.
func procName(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// atClkTck is the auxiliary-vector entry holding sysconf(_SC_CLK_TCK).
const atClkTck = 17

// defaultClkTck is USER_HZ on every Linux architecture Go supports.
const defaultClkTck = 100

// clockTicks is the kernel's clock ticks per second for /proc times, read
// from this process's auxiliary vector as sysconf(_SC_CLK_TCK) does;
// 100 when it cannot be read.
func clockTicks() int64 {
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return defaultClkTck
	}
	if hz, ok := ParseAuxv(b, int(unsafe.Sizeof(uintptr(0))), binary.NativeEndian); ok && hz > 0 {
		return hz
	}
	return defaultClkTck
}

// ParseAuxv finds AT_CLKTCK in the bytes of /proc/self/auxv: pairs of
// machine words (type, value), ended by type 0.
func ParseAuxv(b []byte, word int, order binary.ByteOrder) (int64, bool) {
	read := func(p []byte) uint64 {
		if word == 4 {
			return uint64(order.Uint32(p))
		}
		return order.Uint64(p)
	}
	if word != 4 && word != 8 {
		return 0, false
	}
	for len(b) >= 2*word {
		typ, val := read(b[:word]), read(b[word:2*word])
		b = b[2*word:]
		switch typ {
		case 0:
			return 0, false
		case atClkTck:
			return int64(val), true
		}
	}
	return 0, false
}
