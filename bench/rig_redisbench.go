package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Result is the summary that one redis-benchmark run prints: throughput in
// requests per second and latencies in milliseconds.
type Result struct {
	RPS                          float64
	Avg, Min, P50, P95, P99, Max float64
}

// ErrNoSummary is returned (wrapped) by ParseOutput when the output holds
// no summary of a finished test.
var ErrNoSummary = errors.New("bench: no redis-benchmark summary in the output")

// ParseOutput reads the summary of one test from redis-benchmark 7 output,
// in either of its formats:
//
//	--csv: a header line and one line per test, latencies in ms
//	"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
//	"RL.TAKE key:__rand_int__ 1","41407.87","1.144","0.168","1.087","1.735","2.519","6.471"
//
//	default: the last lines of the report
//	Summary:
//	  throughput summary: 39682.54 requests per second
//	  latency summary (msec):
//	          avg       min       p50       p95       p99       max
//	        2.250     0.248     1.903     4.823     5.951    12.055
//
// The progress lines that redis-benchmark overwrites with '\r', and the
// cluster preamble of --cluster, are skipped. More than one test is an
// error: each run measures one command.
func ParseOutput(out []byte) (Result, error) {
	text := strings.ReplaceAll(string(out), "\r", "\n")
	if i := strings.Index(text, `"test","rps"`); i >= 0 {
		return parseCSV(text[i:])
	}
	return parseText(text)
}

func parseCSV(text string) (Result, error) {
	r := csv.NewReader(strings.NewReader(text))
	r.FieldsPerRecord = -1
	header, err := r.Read()
	if err != nil {
		return Result{}, fmt.Errorf("bench: redis-benchmark csv header: %w", err)
	}
	var rows [][]string
	for {
		row, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Result{}, fmt.Errorf("bench: redis-benchmark csv: %w", err)
		}
		if len(row) == 1 && strings.TrimSpace(row[0]) == "" {
			continue
		}
		rows = append(rows, row)
	}
	switch {
	case len(rows) == 0:
		return Result{}, fmt.Errorf("%w: the csv header has no test line", ErrNoSummary)
	case len(rows) > 1:
		return Result{}, fmt.Errorf("bench: redis-benchmark csv has %d tests, want 1", len(rows))
	}
	row := rows[0]
	if len(row) != len(header) {
		return Result{}, fmt.Errorf("bench: redis-benchmark csv line has %d fields, the header %d", len(row), len(header))
	}
	cols := map[string]string{}
	for i, h := range header {
		cols[h] = row[i]
	}
	return fill(map[string]string{
		"rps": cols["rps"], "avg": cols["avg_latency_ms"], "min": cols["min_latency_ms"],
		"p50": cols["p50_latency_ms"], "p95": cols["p95_latency_ms"], "p99": cols["p99_latency_ms"],
		"max": cols["max_latency_ms"],
	})
}

func parseText(text string) (Result, error) {
	vals := map[string]string{}
	lines := strings.Split(text, "\n")
	tests := 0
	for i, line := range lines {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "throughput summary:"); ok {
			tests++
			f := strings.Fields(rest)
			if len(f) == 0 {
				return Result{}, fmt.Errorf("bench: redis-benchmark: cannot read %q", line)
			}
			vals["rps"] = f[0]
		}
		if strings.HasPrefix(line, "latency summary (msec):") {
			if i+2 >= len(lines) {
				return Result{}, fmt.Errorf("%w: the latency summary is cut short", ErrNoSummary)
			}
			names, nums := strings.Fields(lines[i+1]), strings.Fields(lines[i+2])
			if len(nums) == 0 {
				return Result{}, fmt.Errorf("%w: the latency summary is cut short", ErrNoSummary)
			}
			if len(names) != len(nums) {
				return Result{}, fmt.Errorf("bench: redis-benchmark latency summary has %d names and %d values", len(names), len(nums))
			}
			for j, n := range names {
				vals[n] = nums[j]
			}
		}
	}
	switch {
	case tests == 0:
		return Result{}, ErrNoSummary
	case tests > 1:
		return Result{}, fmt.Errorf("bench: redis-benchmark output has %d tests, want 1", tests)
	}
	return fill(vals)
}

// fill builds a Result from the named values, every one required.
func fill(vals map[string]string) (Result, error) {
	var r Result
	for _, f := range []struct {
		name string
		dst  *float64
	}{
		{"rps", &r.RPS}, {"avg", &r.Avg}, {"min", &r.Min}, {"p50", &r.P50},
		{"p95", &r.P95}, {"p99", &r.P99}, {"max", &r.Max},
	} {
		s, ok := vals[f.name]
		if !ok || s == "" {
			return Result{}, fmt.Errorf("%w: no %s", ErrNoSummary, f.name)
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < 0 {
			return Result{}, fmt.Errorf("bench: redis-benchmark %s %q is not a number", f.name, s)
		}
		*f.dst = v
	}
	if r.RPS <= 0 {
		return Result{}, fmt.Errorf("bench: redis-benchmark reports %v requests per second", r.RPS)
	}
	return r, nil
}

// invocation is one redis-benchmark command line.
type invocation struct {
	Cluster  bool // --cluster: Host:Port is a seed, keys carry {tag}
	Host     string
	Port     string
	Clients  int
	Requests int
	Pipeline int
	Keyspace int // -r; 0 for a fixed key
	Threads  int // --threads; 0 for redis-benchmark's default
	Command  []string
}

// argv is the argument list, --csv last of the options.
func (in invocation) argv() []string {
	var a []string
	if in.Cluster {
		a = append(a, "--cluster")
	}
	a = append(a, "-h", in.Host, "-p", in.Port,
		"-c", strconv.Itoa(in.Clients), "-n", strconv.Itoa(in.Requests), "-P", strconv.Itoa(in.Pipeline))
	if in.Keyspace > 0 {
		a = append(a, "-r", strconv.Itoa(in.Keyspace))
	}
	if in.Threads > 0 {
		a = append(a, "--threads", strconv.Itoa(in.Threads))
	}
	a = append(a, "--csv")
	return append(a, in.Command...)
}

// String is the command line as a shell would take it.
func (in invocation) String() string {
	parts := []string{"redis-benchmark"}
	for _, a := range in.argv() {
		parts = append(parts, shellQuote(a))
	}
	return strings.Join(parts, " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/,=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// runBenchmark runs one invocation and parses its summary. redis-benchmark
// 7 exits with status 1 at the first error reply ("Error from server: …" on
// stderr), so any error reply fails the run.
func runBenchmark(ctx context.Context, bin string, in invocation, timeout time.Duration) (Result, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, in.argv()...)
	cmd.SysProcAttr = childAttr()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &limitedBuffer{max: 1 << 20, b: &stdout}, &limitedBuffer{max: 64 << 10, b: &stderr}
	began := time.Now()
	err := cmd.Run()
	took := time.Since(began)
	if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return Result{}, took, fmt.Errorf("bench: %s: still running after %v", in, timeout)
	}
	if err != nil {
		return Result{}, took, fmt.Errorf("bench: %s: %v\n%s", in, err, tail(stderr.String()+stdout.String(), 20))
	}
	if s := stderr.String(); strings.Contains(s, "Error from server") {
		return Result{}, took, fmt.Errorf("bench: %s: error replies:\n%s", in, tail(s, 20))
	}
	r, err := ParseOutput(stdout.Bytes())
	if err != nil {
		return Result{}, took, fmt.Errorf("%w\n%s", err, tail(stdout.String(), 20))
	}
	return r, took, nil
}

// benchmarkVersion is the first line of `redis-benchmark --version`.
func benchmarkVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	sc := bufio.NewScanner(strings.NewReader(strings.ReplaceAll(s, "\r", "\n")))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var lines []string
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// limitedBuffer keeps the first max bytes written to it and drops the rest,
// so a chatty child cannot grow memory without bound.
type limitedBuffer struct {
	max int
	b   *bytes.Buffer
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
