package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluice-rl/sluice/limit"
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
			for i := 0; i < b.N; i += pipeline {
				if _, err := io.WriteString(nc, req); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(rd, buf); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if string(buf) != want {
				b.Fatalf("reply %q, want %q", buf, want)
			}
			if want := int64((b.N + pipeline - 1) / pipeline * pipeline); d.n.Load() != want {
				b.Fatalf("Decider saw %d takes, want %d", d.n.Load(), want)
			}
		})
	}
}
