package bench

import (
	"encoding/binary"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func TestParseStat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, stat string
		want       uint64
	}{
		{
			"redis-server",
			"8847 (redis-server) S 8820 8820 6331 0 -1 4194560 1436 0 0 0 153 87 0 0 20 0 5 0 252302 78340096 3788 18446744073709551615 1 1 0 0 0 0 0 4097 17642 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
			240,
		},
		{
			// A command name may hold spaces and parentheses.
			"odd name",
			"42 (a) b (c)) R 1 42 42 0 -1 4194304 100 0 0 0 7 5 0 0 20 0 1 0 251994 3133440 387 18446744073709551615\n",
			12,
		},
	}
	for _, tt := range tests {
		got, err := ParseStat([]byte(tt.stat))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got != tt.want {
			t.Errorf("%s: ParseStat = %d, want %d", tt.name, got, tt.want)
		}
	}
	for _, bad := range []string{"", "1 (x) S 1 2 3", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 u s"} {
		if _, err := ParseStat([]byte(bad)); err == nil {
			t.Errorf("ParseStat(%q) succeeded", bad)
		}
	}
}

func TestParseAuxv(t *testing.T) {
	t.Parallel()
	vec := func(word int, pairs ...uint64) []byte {
		var b []byte
		for _, v := range pairs {
			if word == 4 {
				b = binary.LittleEndian.AppendUint32(b, uint32(v))
			} else {
				b = binary.LittleEndian.AppendUint64(b, v)
			}
		}
		return b
	}
	tests := []struct {
		name   string
		word   int
		b      []byte
		want   int64
		wantOK bool
	}{
		{"64-bit", 8, vec(8, 33, 0x7fff, 16, 0xbfebfbff, 6, 4096, 17, 100, 3, 0x400040, 0, 0), 100, true},
		{"32-bit", 4, vec(4, 6, 4096, 17, 250, 0, 0), 250, true},
		{"absent", 8, vec(8, 6, 4096, 0, 0, 17, 100), 0, false},
		{"truncated", 8, vec(8, 6, 4096, 17)[:20], 0, false},
		{"bad word", 2, vec(4, 17, 100), 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseAuxv(tt.b, tt.word, binary.LittleEndian)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("%s: ParseAuxv = %d, %v; want %d, %v", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestClockTicksMatchesGetconf(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux-only")
	}
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		t.Skipf("getconf: %v", err)
	}
	want, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if got := clockTicks(); got != want {
		t.Errorf("clockTicks = %d, getconf CLK_TCK = %d", got, want)
	}
}

func TestCPUTicksOfThisProcess(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux-only")
	}
	if _, err := cpuTicks([]int{os.Getpid()}); err != nil {
		t.Fatal(err)
	}
	if got := procName(os.Getpid()); got == "" {
		t.Error("procName of this process is empty")
	}
	if _, err := cpuTicks([]int{-1}); err == nil {
		t.Error("cpuTicks of pid -1 succeeded")
	}
}
