package bench

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// sampleReport is two rounds of two cells, as Run would record them.
func sampleReport() *Report {
	trial := func(round int, sc Scenario, p int, side Side, rps, p50, p99, redisCPU, sluiceCPU float64) Trial {
		perCall, perPipeline := math.NaN(), math.NaN()
		if side == Sluice {
			perCall, perPipeline = 8, 2+float64(round)
		}
		return Trial{Round: round, Scenario: sc, Pipeline: p, Side: side, Requests: 200000,
			Command:  "redis-benchmark -h 127.0.0.1 -p 6380 RL.TAKE " + string(sc),
			Result:   Result{RPS: rps, P50: p50, P99: p99, Max: 9},
			RedisCPU: redisCPU, PrimaryCPU: redisCPU / 2, SluiceCPU: sluiceCPU, PerCall: perCall, PerPipeline: perPipeline,
			ScriptCalls: []int64{66000, 67000, 67000}, Elapsed: 5 * time.Second}
	}
	nan := math.NaN()
	r := &Report{
		Machine: Machine{CPUs: 2, Nproc: "2", CPUModel: "Test CPU <2 GHz> & more", Go: "go1.26", OS: "linux/amd64", Sluice: "0.1.0-dev",
			Redis: "7.0.15", Benchmark: "redis-benchmark 7.0.15", Date: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)},
		Clients: 50, Keyspace: 1000000, Rounds: 2, Threads: 1,
		Primaries: []string{"127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"},
		RedisCPU:  true, SluiceCPU: true,
		Runs: []Trial{
			trial(1, Uniform, 1, Sluice, 20000, 2.0, 5.0, 40, 60),
			trial(1, Uniform, 1, Embedded, 70000, 0.5, 1.0, nan, 20),
			trial(1, Uniform, 1, Direct, 40000, 1.0, 3.0, 30, nan),
			trial(1, Hot, 16, Sluice, 30000, 20.0, 40.0, 20, 30),
			trial(1, Hot, 16, Embedded, 300000, 2.0, 4.0, nan, 4),
			trial(1, Hot, 16, Direct, 60000, 10.0, 20.0, 10, nan),
			trial(2, Uniform, 1, Sluice, 22000, 2.2, 5.4, 42, 62),
			trial(2, Uniform, 1, Embedded, 74000, 0.7, 1.4, nan, 22),
			trial(2, Uniform, 1, Direct, 44000, 1.2, 3.2, 32, nan),
			trial(2, Hot, 16, Sluice, 32000, 22.0, 44.0, 22, 34),
			trial(2, Hot, 16, Embedded, 320000, 2.2, 4.4, nan, 5),
			trial(2, Hot, 16, Direct, 64000, 12.0, 24.0, 12, nan),
		},
		Elapsed: 3*time.Minute + 12*time.Second,
	}
	r.aggregate()
	return r
}

func TestAggregate(t *testing.T) {
	t.Parallel()
	r := sampleReport()
	if len(r.Rows) != 2 {
		t.Fatalf("%d rows, want 2", len(r.Rows))
	}
	u := r.Rows[0]
	if u.Scenario != Uniform || u.Pipeline != 1 {
		t.Errorf("first row is %s P%d, want uniform P1 (the order of the runs)", u.Scenario, u.Pipeline)
	}
	if u.Sluice.RPS != 21000 || u.Direct.RPS != 42000 || u.Sluice.P99 != 5.2 || u.Sluice.RedisCPU != 41 || u.Sluice.SluiceCPU != 61 {
		t.Errorf("uniform row = %+v", u)
	}
	if got := u.Ratio(); got != 0.5 {
		t.Errorf("Ratio = %v, want 0.5", got)
	}
	if got := r.Rows[1].CPURatio(); got != 21.0/11.0 {
		t.Errorf("CPURatio = %v, want 21/11", got)
	}
	if !math.IsNaN(u.Direct.SluiceCPU) {
		t.Errorf("direct sluice CPU = %v, want NaN", u.Direct.SluiceCPU)
	}
	if u.Embedded.RPS != 72000 || u.Embedded.SluiceCPU != 21 || !math.IsNaN(u.Embedded.RedisCPU) || !math.IsNaN(u.Embedded.PerPipeline) {
		t.Errorf("uniform embedded = %+v", u.Embedded)
	}
	if got := u.StoreCPU(); got != 40 {
		t.Errorf("StoreCPU = %v, want 61 - 21 = 40", got)
	}
	if got := u.Sluice.PerPipeline; got != 3.5 {
		t.Errorf("sluice commands per pipeline = %v, want the median 3.5 of 3 and 4", got)
	}
	// A report without the embedded side (Config.NoEmbedded) has NaN there.
	r.Runs = slices.DeleteFunc(r.Runs, func(t Trial) bool { return t.Side == Embedded })
	r.aggregate()
	if e := r.Rows[0].Embedded; !math.IsNaN(e.RPS) || !math.IsNaN(r.Rows[0].StoreCPU()) {
		t.Errorf("without embedded runs: embedded %+v, StoreCPU %v; want NaN", e, r.Rows[0].StoreCPU())
	}
}

func TestMedian(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, tt := range tests {
		if got := Median(tt.in); got != tt.want {
			t.Errorf("Median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
	for _, in := range [][]float64{nil, {1, math.NaN()}} {
		if got := Median(in); !math.IsNaN(got) {
			t.Errorf("Median(%v) = %v, want NaN", in, got)
		}
	}
	in := []float64{3, 1, 2}
	Median(in)
	if in[0] != 3 {
		t.Error("Median sorted its argument")
	}
}

func TestMarkdown(t *testing.T) {
	t.Parallel()
	md := sampleReport().Markdown()
	for _, want := range []string{
		"Machine: 2 CPUs (nproc 2), Test CPU <2 GHz> & more; linux/amd64; go1.26; sluice 0.1.0-dev; redis-server 7.0.15; redis-benchmark 7.0.15; 2025-01-02 03:04 UTC.",
		"50 clients, 1 redis-benchmark thread, uniform keyspace 1,000,000, 3 primaries (+ replicas); each cell ran 2 rounds on each side, sluice, embedded then direct, and shows the **median** of the rounds; the whole run took 3m12s.",
		"| uniform | 1 | 200,000 | 21,000 | 72,000 | 42,000 | 0.50 | 2.100 / 5.200 | 0.600 / 1.200 | 1.100 / 3.100 | 41.0 (20.5 + 20.5) | 31.0 (15.5 + 15.5) | 1.32 | 61.0 | 21.0 | 40.0 | 3.5 | 8.0 |",
		"| hot | 16 | 200,000 | 31,000 | 310,000 | 62,000 | 0.50 | 21.000 / 42.000 | 2.100 / 4.200 | 11.000 / 22.000 | 21.0 (10.5 + 10.5) | 11.0 (5.5 + 5.5) | 1.91 | 32.0 | 4.5 | 27.5 | 3.5 | 8.0 |",
		"- uniform P1 sluice: `redis-benchmark -h 127.0.0.1 -p 6380 RL.TAKE uniform`",
		"- uniform P1 embedded: `redis-benchmark -h 127.0.0.1 -p 6380 RL.TAKE uniform`",
		"| 1 | 1 | uniform | 1 | sluice | 20,000 | 2.000 | 5.000 | 9.000 | 40.0 | 60.0 | 3.0 | 8.0 | 66000 / 67000 / 67000 | 5s |",
		"| 2 | 1 | uniform | 1 | embedded | 70,000 | 0.500 | 1.000 | 9.000 | n/a | 20.0 | n/a | n/a | 66000 / 67000 / 67000 | 5s |",
		"| 3 | 1 | uniform | 1 | direct | 40,000 | 1.000 | 3.000 | 9.000 | 30.0 | n/a | n/a | n/a | 66000 / 67000 / 67000 | 5s |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks\n%s\nin\n%s", want, md)
		}
	}
	if n := strings.Count(md, "- uniform P1 sluice:"); n != 1 {
		t.Errorf("the uniform P1 sluice command is listed %d times, want once", n)
	}
	// Every table line has as many cells as its header.
	var header int
	for _, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "|") {
			header = 0
			continue
		}
		n := strings.Count(line, "|")
		if header == 0 {
			header = n
		} else if n != header {
			t.Errorf("table line has %d bars, its header %d: %s", n, header, line)
		}
	}
}

func TestMarkdownWithoutCPU(t *testing.T) {
	t.Parallel()
	r := sampleReport()
	r.RedisCPU, r.SluiceCPU = false, false
	md := r.Markdown()
	for _, want := range []string{"Redis CPU is n/a", "sluice CPU is n/a"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
}

func TestFormatting(t *testing.T) {
	t.Parallel()
	for v, want := range map[float64]string{0: "0", 999.5: "1,000", 1234567: "1,234,567", -12345: "-12,345", math.NaN(): "n/a"} {
		if got := thousands(v); got != want {
			t.Errorf("thousands(%v) = %s, want %s", v, got, want)
		}
	}
	for v, want := range map[float64]string{950: "950", 41234: "41.2k", 40000: "40k", 1250000: "1.25M", 2e6: "2M"} {
		if got := short(v); got != want {
			t.Errorf("short(%v) = %s, want %s", v, got, want)
		}
	}
	if got := fixed(math.NaN(), 2); got != "n/a" {
		t.Errorf("fixed(NaN) = %s", got)
	}
}
