package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/local"
	"github.com/sluice-rl/sluice/policy"
)

// countDecider admits everything and counts, so the benchmark measures the
// front end rather than a fake's map and mutex.
type countDecider struct{ n atomic.Int64 }

func (d *countDecider) Decide(_ context.Context, reqs []limit.Request, out []limit.Result) {
	for i := range reqs {
		out[i] = limit.Result{Allowed: true, Limit: 100, Remaining: 99, RetryAfterMs: -1, ResetAfterMs: 10, DecidedBy: limit.ByStore}
	}
	d.n.Add(int64(len(reqs)))
}

func (d *countDecider) Reset(context.Context, string) (bool, error) { return false, nil }

// BenchmarkTake measures RL.TAKE through a real TCP connection: the client
// writes pipelines of N commands and reads the N replies. ns/op and
// allocs/op are per command, server and client together (the client's
// share is a reply read into a reused buffer).
func BenchmarkTake(b *testing.B) {
	for _, pipeline := range []int{1, 16} {
		b.Run(fmt.Sprintf("pipeline=%d", pipeline), func(b *testing.B) {
			d := &countDecider{}
			_, addr := start(b, Config{Decider: d})
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			req := strings.Repeat("*3\r\n$7\r\nRL.TAKE\r\n$8\r\nuser:123\r\n$1\r\n1\r\n", pipeline)
			const reply = "*6\r\n:1\r\n:100\r\n:99\r\n:-1\r\n:10\r\n$5\r\nstore\r\n"
			want := strings.Repeat(reply, pipeline)
			buf := make([]byte, len(want))
			rd := bufio.NewReader(nc)

			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU(b)
			for i := 0; i < b.N; i += pipeline {
				if _, err := io.WriteString(nc, req); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(rd, buf); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportCPU(b, cpu0)
			if string(buf) != want {
				b.Fatalf("reply %q, want %q", buf, want)
			}
			if want := int64((b.N + pipeline - 1) / pipeline * pipeline); d.n.Load() != want {
				b.Fatalf("Decider saw %d takes, want %d", d.n.Load(), want)
			}
		})
	}
}

// benchKeys is the number of distinct keys BenchmarkTakeEmbedded cycles
// through, so the store's map holds many buckets as under redis-benchmark -r.
const benchKeys = 1 << 16

// BenchmarkTakeEmbedded is the front end with the real decision path of the
// embedded mode (limiter over the in-process store, the catch-all policy,
// no hot-key layer): RL.TAKE over one TCP connection, uniform keys out of
// benchKeys, pipelines of 1 and 16. It is the in-process version of
// redis-benchmark against `sluice serve` without a store. ns/op and
// allocs/op are per command, server and client together; the client
// allocates nothing per command.
func BenchmarkTakeEmbedded(b *testing.B) {
	for _, pipeline := range []int{1, 16} {
		b.Run(fmt.Sprintf("pipeline=%d", pipeline), func(b *testing.B) {
			lim, err := limiter.New(limiter.Config{Policies: policy.Default(),
				Store: local.New(local.Config{DecidedBy: limit.ByEmbedded})})
			if err != nil {
				b.Fatal(err)
			}
			_, addr := start(b, Config{Decider: lim})
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			// One pipeline's requests for every run of benchKeys/pipeline
			// keys, built before the timer starts.
			reqs := make([][]byte, benchKeys/pipeline)
			for i := range reqs {
				var buf bytes.Buffer
				for j := range pipeline {
					key := "key:" + strconv.Itoa(i*pipeline+j)
					fmt.Fprintf(&buf, "*3\r\n$7\r\nRL.TAKE\r\n$%d\r\n%s\r\n$1\r\n1\r\n", len(key), key)
				}
				reqs[i] = buf.Bytes()
			}
			rd := bufio.NewReader(nc)

			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU(b)
			admitted := 0
			for i := 0; i < b.N; i += pipeline {
				if _, err := nc.Write(reqs[(i/pipeline)%len(reqs)]); err != nil {
					b.Fatal(err)
				}
				for range pipeline {
					ok, err := readTakeReply(rd)
					if err != nil {
						b.Fatal(err)
					}
					if ok {
						admitted++
					}
				}
			}
			b.StopTimer()
			reportCPU(b, cpu0)
			if want := (b.N + pipeline - 1) / pipeline * pipeline; admitted != want {
				b.Fatalf("%d of %d takes admitted, want all (the default policy)", admitted, want)
			}
			if s := lim.Snapshot(); s.Decisions != int64(admitted) || s.ByPath[limit.ByEmbedded] != s.Decisions {
				b.Fatalf("the limiter decided %d (%d embedded), want %d embedded", s.Decisions, s.ByPath[limit.ByEmbedded], admitted)
			}
		})
	}
}

// readTakeReply reads one RL.TAKE reply without allocating and reports
// whether it admitted: "*6", five integers, then the bulk decided_by.
func readTakeReply(rd *bufio.Reader) (bool, error) {
	var allowed bool
	for i := range 8 {
		line, err := rd.ReadSlice('\n')
		if err != nil {
			return false, err
		}
		switch {
		case i == 0 && string(line) != "*6\r\n":
			return false, fmt.Errorf("reply starts %q, want *6", line)
		case i == 1:
			allowed = string(line) == ":1\r\n"
		}
	}
	return allowed, nil
}

// processCPU is the CPU time (user + system) the process used so far.
// On this shared machine it is steadier than ns/op, which also counts the
// time the benchmark waited for a core.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time since cpu0 per command as cpu-ns/op:
// server and client together, as ns/op.
func reportCPU(b *testing.B, cpu0 time.Duration) {
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}
