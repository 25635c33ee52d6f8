package bench

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseOutput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file string
		want Result
	}{
		// redis-benchmark 7.0.15 --cluster, default format, with its '\r' progress lines.
		{"cluster-evalsha-text.txt", Result{RPS: 39682.54, Avg: 2.250, Min: 0.248, P50: 1.903, P95: 4.823, P99: 5.951, Max: 12.055}},
		// --cluster --csv: the cluster preamble comes first.
		{"cluster-evalsha-csv.txt", Result{RPS: 19607.84, Avg: 1.039, Min: 0.136, P50: 0.903, P95: 2.223, P99: 3.423, Max: 6.967}},
		{"single-set-text.txt", Result{RPS: 90909.09, Avg: 0.036, Min: 0.008, P50: 0.039, P95: 0.055, P99: 0.079, Max: 0.711}},
		{"sluice-rltake-csv.txt", Result{RPS: 31347.96, Avg: 22.541, Min: 0.264, P50: 21.823, P95: 44.031, P99: 56.319, Max: 61.919}},
		{"sluice-rltake-text.txt", Result{RPS: 18570.10, Avg: 2.638, Min: 0.032, P50: 1.703, P95: 5.127, P99: 7.687, Max: 14.007}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			out, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseOutput(out)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("ParseOutput = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseOutputErrors(t *testing.T) {
	t.Parallel()
	noscript, err := os.ReadFile(filepath.Join("testdata", "noscript-stderr.txt"))
	if err != nil {
		t.Fatal(err)
	}
	const header = `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"` + "\n"
	const line = `"PING","100.00","1.0","0.1","1.0","2.0","3.0","4.0"` + "\n"
	tests := []struct {
		name, out  string
		noSummary  bool
		wantSubstr string
	}{
		{"empty", "", true, ""},
		{"error reply only", string(noscript), true, ""},
		{"csv header only", header, true, ""},
		{"csv two tests", header + line + line, false, "2 tests"},
		{"csv short line", header + `"PING","100.00"` + "\n", false, "fields"},
		{"csv not a number", header + strings.Replace(line, "3.0", "x", 1), false, "p99"},
		{"csv zero rps", header + strings.Replace(line, "100.00", "0", 1), false, "requests per second"},
		{"text no latency", "  throughput summary: 5.00 requests per second\n", true, ""},
		{"text cut short", "  throughput summary: 5.00 requests per second\n  latency summary (msec):\n  avg\n", true, ""},
		{"text mismatched", "  throughput summary: 5.00 requests per second\n  latency summary (msec):\n  avg min\n  1.0\n", false, "names"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseOutput([]byte(tt.out))
			if err == nil {
				t.Fatal("ParseOutput succeeded, want an error")
			}
			if got := errors.Is(err, ErrNoSummary); got != tt.noSummary {
				t.Errorf("errors.Is(%v, ErrNoSummary) = %v, want %v", err, got, tt.noSummary)
			}
			if !strings.Contains(err.Error(), tt.wantSubstr) {
				t.Errorf("error %q lacks %q", err, tt.wantSubstr)
			}
		})
	}
}

func TestInvocation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   invocation
		want string
	}{
		{
			"direct uniform",
			invocation{Cluster: true, Host: "127.0.0.1", Port: "7000", Clients: 50, Requests: 200000, Pipeline: 1, Keyspace: 1000000,
				Command: []string{"EVALSHA", "abc", "1", "sluice:{tag}:__rand_int__", "1000000000", "1000", "1", "1", "0"}},
			"redis-benchmark --cluster -h 127.0.0.1 -p 7000 -c 50 -n 200000 -P 1 -r 1000000 --csv EVALSHA abc 1 'sluice:{tag}:__rand_int__' 1000000000 1000 1 1 0",
		},
		{
			"sluice hot with threads",
			invocation{Host: "::1", Port: "6380", Clients: 2, Requests: 10, Pipeline: 16, Threads: 2, Command: []string{"RL.TAKE", "hot", "1"}},
			"redis-benchmark -h ::1 -p 6380 -c 2 -n 10 -P 16 --threads 2 --csv RL.TAKE hot 1",
		},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

func TestShellQuote(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain:key_1":  "plain:key_1",
		"":             "''",
		"sluice:{hot}": "'sluice:{hot}'",
		"it's":         `'it'\''s'`,
		"a b":          "'a b'",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestInfoFields(t *testing.T) {
	t.Parallel()
	text := "# Commandstats\r\ncmdstat_evalsha:calls=293023,usec=8454724,usec_per_call=28.85,rejected_calls=1,failed_calls=2\r\n\r\n# Stats\r\ntotal_error_replies:3\r\n"
	f := infoFields(text)
	if got := f["total_error_replies"]; got != "3" {
		t.Errorf("total_error_replies = %q, want 3", got)
	}
	cs := commandStat(f["cmdstat_evalsha"])
	if cs["calls"] != 293023 || cs["rejected_calls"] != 1 || cs["failed_calls"] != 2 {
		t.Errorf("commandStat = %v", cs)
	}
	if _, ok := cs["usec_per_call"]; ok {
		t.Error("commandStat kept a fraction")
	}
}

func TestNodeAddrs(t *testing.T) {
	t.Parallel()
	text := `07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004,host-a slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30003@31003 master,fail - 0 1426238318243 3 connected
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460
`
	got, err := nodeAddrs(text)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.1:30004", "127.0.0.1:30002", "127.0.0.1:30001"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("nodeAddrs = %v, want %v", got, want)
	}
	if _, err := nodeAddrs("garbage"); err == nil {
		t.Error("nodeAddrs(garbage) succeeded")
	}
}

func TestNodeCalls(t *testing.T) {
	t.Parallel()
	text := "# Sluice\r\ndecisions:100\r\n" +
		"node_127.0.0.1:7000:breaker=closed,pipelines=3,commands=6,decisions=40,avg_batch=2.00,decisions_per_call=6.67\r\n" +
		"node_127.0.0.1:7001:breaker=closed,pipelines=5,commands=4,decisions=60,avg_batch=0.80,decisions_per_call=15.00\r\n" +
		"nodes_total:7\r\n"
	if got, want := nodeCalls(text), (nodeTotals{pipelines: 8, commands: 10, decisions: 100}); got != want {
		t.Fatalf("nodeCalls = %+v, want %+v (both nodes' lines)", got, want)
	}
}
