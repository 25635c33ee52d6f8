package bench

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sampleTable has every row twice per binary, A's figures below B's.
func sampleTable() *TableReport {
	rep := &TableReport{Config: TableConfig{Binaries: []string{"/tmp/old", "/tmp/new"}, Labels: []string{"old", "new"}, Requests: 50_000,
		Rounds: 2, Clients: 50}, Machine: goldenMachine, Elapsed: 150 * time.Second}
	for round := 1; round <= 2; round++ {
		for b := range 2 {
			for i, row := range tableRows {
				c := TableCell{Row: row, Round: round, Binary: b, SluiceRPS: float64(10_000 * (1 + b + round)), DirectRPS: 10_000,
					SluiceRedisCPU: float64(10 - b - round), DirectRedisCPU: 10, SluiceCPU: float64(20 - 2*b - round),
					SluiceAllRedisCPU: math.NaN(), DirectAllRedisCPU: math.NaN(), ByStore: 0.9, ByLease: 0.1}
				if i < 2 {
					c.SluiceAllRedisCPU, c.DirectAllRedisCPU, c.ByStore, c.ByLease = 12, 12, math.NaN(), math.NaN()
				}
				rep.Cells = append(rep.Cells, c)
			}
		}
	}
	rep.aggregate()
	return rep
}

func TestTableAggregate(t *testing.T) {
	t.Parallel()
	rep := sampleTable()
	if len(rep.Rows) != len(tableRows) {
		t.Fatalf("%d rows, want %d", len(rep.Rows), len(tableRows))
	}
	for _, r := range rep.Rows {
		// old: rounds 1, 2 give ratios 2 and 3 (median 2.5), CPU 0.9 and
		// 0.8, own CPU 19 and 18; new: 3 and 4, 0.8 and 0.7, 17 and 16.
		for _, tc := range []struct{ col, got, want string }{
			{"ratio", r.Pair("ratio", 2), "2.50 → 3.50"},
			{"cpu", r.Pair("cpu", 2), "0.85 → 0.75"},
			{"own", r.Pair("own", 1), "18.5 → 16.5"},
			{"rps", r.Pair("rps", 0), "25,000 → 35,000"},
		} {
			if tc.got != tc.want {
				t.Errorf("%s, %s: got %q, want %q", r.Row, tc.col, tc.got, tc.want)
			}
		}
	}
	if !rep.Rows[0].HasAll() || rep.Rows[2].HasAll() {
		t.Errorf("every redis-server's CPU: uniform %v, Zipf %v; want only the redis-benchmark rows", rep.Rows[0].HasAll(), rep.Rows[2].HasAll())
	}
	md := rep.Markdown()
	for _, row := range tableRows {
		if !strings.Contains(md, "| "+row+" | 2.50 → 3.50 | 0.85 → 0.75 | 18.5 → 16.5 | 25,000 → 35,000 | 10,000 → 10,000 |") {
			t.Errorf("no summary row %q in:\n%s", row, md)
		}
	}
	for _, want := range []string{"| 1 | old | uniform keys (redis-benchmark), P1 | 20,000 | 10,000 | 2.00 | 9.0 / 10.0 | 0.90 | 19.0 | store 100 % (checked) |",
		"| 2 | new | one hot key (default lease), P16 | 40,000 | 10,000 | 4.00 | 7.0 / 10.0 | 0.70 | 16.0 | store 90.0 %, lease 10.0 % |"} {
		if !strings.Contains(md, want) {
			t.Errorf("no run line %q in:\n%s", want, md)
		}
	}
	if strings.Contains(md, "no value") || strings.Contains(md, "template:") {
		t.Errorf("the template failed:\n%s", md)
	}
}

func TestTableConfigRefuses(t *testing.T) {
	t.Parallel()
	exe := filepath.Join(t.TempDir(), "sluice")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  TableConfig
		want string
	}{
		{"one binary", TableConfig{Binaries: []string{exe}}, "want two sluice binaries"},
		{"missing", TableConfig{Binaries: []string{exe, exe + ".nope"}}, "is not an executable file"},
		{"a folder", TableConfig{Binaries: []string{exe, filepath.Dir(exe)}}, "is not an executable file"},
		{"labels", TableConfig{Binaries: []string{exe, exe}, Labels: []string{"x"}}, "1 labels for 2 binaries"},
	} {
		err := tc.cfg.resolve()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
	ok := TableConfig{Binaries: []string{exe, exe}}
	if err := ok.resolve(); err != nil || ok.Requests != DefaultTableRequests || ok.Rounds != DefaultTableRounds || ok.Labels[1] != "B" {
		t.Errorf("defaults: %+v, %v", ok, err)
	}
}

// --ab runs only its own rows: the flags of the other modes are refused,
// not ignored.
func TestBenchABRefusesOtherFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--ab", "a,b", "--keys", "uniform"},
		{"--ab", "a,b", "--pipelines", "1"},
		{"--ab", "a,b", "--binary", "x"},
	} {
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		run := BenchFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		err := run(t.Context(), &out, &out)
		if err == nil || !strings.Contains(err.Error(), "do not apply") {
			t.Errorf("%v: error %v, want the flags refused", args, err)
		}
	}
}
