package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/redcon"

	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/lua"
)

// BenchmarkPipelineClient compares, on the client side, the two ways a node
// worker can send what sluice sends a node in one pipeline — one EVALSHA of
// the batch script with N items and two single-key EVALSHAs — to one real
// redis-server: go-redis's Pipelined (what the store uses) and a bare
// connection that encodes with redcon's Append functions into one buffer
// and reads the replies with a flat RESP reader (rawPipe below). Besides
// ns/op (a round trip, Redis included) it reports the client's own CPU per
// decision (getrusage of this process, the Go runtime and GC included) and,
// with -benchmem, allocations per pipeline. The figures and the decision
// they led to are in docs/performance.md ("The client side of the store path").
func BenchmarkPipelineClient(b *testing.B) {
	node := redistest.NewSingle(b)
	ctx := context.Background()
	p := &limit.Policy{Limit: 1 << 40, Rate: 1_000_000_000, Period: time.Second}
	a, err := lua.ArgsFor(p)
	if err != nil {
		b.Fatal(err)
	}
	pa := &policyArgs{script: a.Script, sha: a.Script.SHA, src: a.Script.Src, id: a.ID, limit: a.Limit, rate: a.Rate, unit: a.Unit}
	setup := redis.NewClient(&redis.Options{Addr: node.Addr})
	defer setup.Close()
	for _, s := range []*lua.Script{lua.Batch, a.Script} {
		if err := setup.ScriptLoad(ctx, s.Src).Err(); err != nil {
			b.Fatal(err)
		}
	}
	const singles = 2
	for _, n := range []int{1, 4, 16, 64} {
		items := make([]*item, n+singles)
		for i := range items {
			k := Key("pc:" + strconv.Itoa(i))
			items[i] = &item{key: k, script: a.Script, pa: pa, cost: 1, op: limit.OpTake}
		}
		batched, rest := items[:n], items[n:]
		decisions := float64(n + singles)

		for _, v := range goRedisVariants {
			b.Run(fmt.Sprintf("%s/N=%d", v.name, n), func(b *testing.B) {
				c := redis.NewClient(&redis.Options{Addr: node.Addr, ContextTimeoutEnabled: true, MaxRetries: -1,
					DisableIdentity: true, MaintNotificationsConfig: maintOff(), PoolSize: 2, Protocol: v.protocol})
				defer c.Close()
				pipelined := c.Pipelined
				if v.conn {
					cn := c.Conn()
					defer cn.Close()
					pipelined = cn.Pipelined
				}
				cmds := make([]*redis.IntSliceCmd, len(rest))
				run := func() {
					ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					defer cancel()
					bcmd := batchCmd(ctx, batched, false, false, new(scratch))
					_, _ = pipelined(ctx, func(p redis.Pipeliner) error {
						_ = p.Process(ctx, bcmd)
						for i, it := range rest {
							cmds[i] = redis.NewIntSliceCmd(ctx, it.command(false)...)
							_ = p.Process(ctx, cmds[i])
						}
						return nil
					})
					if v, err := bcmd.Result(); err != nil || len(v) != (1+lua.ReplyInts)*n || v[0] != 1 {
						b.Fatalf("batch: %v %v", v, err)
					}
					for _, cmd := range cmds {
						if r := decodeInts(cmd.Val()); r.Err != nil || !r.Allowed {
							b.Fatalf("single: %+v %v", r, cmd.Err())
						}
					}
				}
				measure(b, run, decisions)
			})
		}

		b.Run(fmt.Sprintf("redcon/N=%d", n), func(b *testing.B) {
			c, err := dialRawPipe(node.Addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.close()
			vals := make([][]int64, 1+len(rest))
			run := func() {
				ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				d, _ := ctx.Deadline()
				c.appendBatch(batched)
				for _, it := range rest {
					c.appendSingle(it)
				}
				if err := c.roundTrip(d, vals); err != nil {
					b.Fatal(err)
				}
				if v := vals[0]; len(v) != (1+lua.ReplyInts)*n || v[0] != 1 {
					b.Fatalf("batch: %v", v)
				}
				for _, v := range vals[1:] {
					if r := decodeInts(v); r.Err != nil || !r.Allowed {
						b.Fatalf("single: %+v", r)
					}
				}
			}
			measure(b, run, decisions)
		})
	}
}

// goRedisVariants are the ways through go-redis measured: the client's
// pool (a health check on every checkout), one sticky connection
// (Client.Conn), each with RESP3 (go-redis's default) and RESP2.
var goRedisVariants = []struct {
	name     string
	conn     bool
	protocol int
}{
	{"go-redis", false, 3},
	{"go-redis-resp2", false, 2},
	{"go-redis-conn", true, 3},
	{"go-redis-conn-resp2", true, 2},
}

// measure runs one pipeline b.N times and reports the client's CPU per
// decision, after a warm-up run that checks the set-up answers.
func measure(b *testing.B, run func(), decisions float64) {
	b.ReportAllocs()
	run()
	cpu0, user0 := processCPU(b), processUser(b)
	b.ResetTimer()
	for b.Loop() {
		run()
	}
	b.StopTimer()
	b.ReportMetric((processCPU(b)-cpu0)/float64(b.N)/decisions, "client-cpu-µs/decision")
	// user time alone: the client's own work, without the system calls'
	// kernel time, which swings most with the machine's load
	b.ReportMetric((processUser(b)-user0)/float64(b.N)/decisions, "client-user-µs/decision")
	b.ReportMetric(decisions, "decisions/op")
}

// processCPU is the user and system CPU time of this process, in µs.
func processCPU(b *testing.B) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
}

// processUser is the user CPU time of this process, in µs.
func processUser(b *testing.B) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return float64(ru.Utime.Nano()) / 1e3
}

// rawPipe is the bare connection measured against go-redis: commands are
// encoded with redcon's Append functions into one buffer, written with one
// write, and the replies — flat arrays of integers, or errors — are read
// into a buffer of bounded size. It is the measuring prototype only: no
// TLS, AUTH, reconnection or pool.
type rawPipe struct {
	c    net.Conn
	r    *bufio.Reader
	w    []byte
	n    int     // commands in w
	ints []int64 // backing store of the replies' integers, reused
}

func dialRawPipe(addr string) (*rawPipe, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &rawPipe{c: c, r: bufio.NewReaderSize(c, 16<<10)}, nil
}

func (c *rawPipe) close() { _ = c.c.Close() }

func (c *rawPipe) appendBatch(items []*item) {
	var pols [4]*policyArgs
	np := 0
	c.w = redcon.AppendArray(c.w, 4+4*1+lua.BatchItemArgs*len(items))
	c.w = redcon.AppendBulkString(c.w, "evalsha")
	c.w = redcon.AppendBulkString(c.w, lua.Batch.SHA)
	c.w = appendBulkInt(c.w, 0)
	for _, it := range items { // the benchmark's items share one policy
		if np == 0 || pols[np-1] != it.pa {
			pols[np] = it.pa
			np++
		}
	}
	c.w = appendBulkInt(c.w, int64(np))
	for _, pa := range pols[:np] {
		c.w = appendBulkInt(c.w, int64(pa.id.(int)))
		for _, x := range []any{pa.limit, pa.rate, pa.unit} {
			c.w = appendBulkInt(c.w, x.(int64))
		}
	}
	for _, it := range items {
		c.w = redcon.AppendBulkString(c.w, it.key)
		c.w = appendBulkInt(c.w, 1)
		c.w = appendBulkInt(c.w, it.cost)
		c.w = redcon.AppendBulkString(c.w, opArg[it.op&3].(string))
	}
	c.n++
}

func (c *rawPipe) appendSingle(it *item) {
	c.w = redcon.AppendArray(c.w, 9)
	c.w = redcon.AppendBulkString(c.w, "evalsha")
	c.w = redcon.AppendBulkString(c.w, it.script.SHA)
	c.w = appendBulkInt(c.w, 1)
	c.w = redcon.AppendBulkString(c.w, it.key)
	for _, x := range []any{it.pa.limit, it.pa.rate, it.pa.unit} {
		c.w = appendBulkInt(c.w, x.(int64))
	}
	c.w = appendBulkInt(c.w, it.cost)
	c.w = redcon.AppendBulkString(c.w, opArg[it.op&3].(string))
	c.n++
}

var errRawReply = errors.New("unexpected reply")

// maxRawLine bounds a reply's header or error line.
const maxRawLine = 4 << 10

// roundTrip writes the queued commands and reads one reply per command
// into vals, whose slices share one reused buffer.
func (c *rawPipe) roundTrip(deadline time.Time, vals [][]int64) error {
	n := c.n
	c.n = 0
	if err := c.c.SetDeadline(deadline); err != nil {
		return err
	}
	_, err := c.c.Write(c.w)
	c.w = c.w[:0]
	if err != nil {
		return err
	}
	c.ints = c.ints[:0]
	spans := make([][2]int, 0, 8)
	for range n {
		line, err := c.line()
		if err != nil {
			return err
		}
		if line[0] != '*' {
			return fmt.Errorf("%w: %q", errRawReply, line)
		}
		cnt, err := strconv.Atoi(string(line[1:]))
		if err != nil || cnt < 0 || cnt > 1<<16 {
			return fmt.Errorf("%w: %q", errRawReply, line)
		}
		start := len(c.ints)
		for range cnt {
			l, err := c.line()
			if err != nil {
				return err
			}
			if l[0] != ':' {
				return fmt.Errorf("%w: %q", errRawReply, l)
			}
			x, err := strconv.ParseInt(string(l[1:]), 10, 64)
			if err != nil {
				return fmt.Errorf("%w: %q", errRawReply, l)
			}
			c.ints = append(c.ints, x)
		}
		spans = append(spans, [2]int{start, len(c.ints)})
	}
	for i, s := range spans {
		vals[i] = c.ints[s[0]:s[1]:s[1]]
	}
	return nil
}

// line reads one CRLF-terminated line, without its CRLF, of at most
// maxRawLine bytes.
func (c *rawPipe) line() ([]byte, error) {
	l, err := c.r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(l) < 3 || l[len(l)-2] != '\r' || len(l) > maxRawLine {
		return nil, fmt.Errorf("%w: %q", errRawReply, l)
	}
	return l[:len(l)-2], nil
}

// BenchmarkStoreConn compares the store's two ways of sending a node's
// pipelines, in one process against one redis-server: go-redis's
// Pipelined on a Conn per slot (Config.goRedisPipes, the fallback) and the
// lean connections of conn.go (the default). The same Do as
// BenchmarkDoAllocs, one key and 16 keys (one call of the batch script);
// with -count N the two alternate, so benchstat compares them on the same
// machine load. client-cpu-µs/decision is this process's CPU (getrusage).
func BenchmarkStoreConn(b *testing.B) {
	node := redistest.NewSingle(b)
	p := &limit.Policy{Limit: 1 << 40, Rate: 1_000_000_000, Period: time.Second}
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = "sc:" + strconv.Itoa(i)
	}
	for _, n := range []int{1, 16} {
		for _, mode := range []struct {
			name    string
			goRedis bool
		}{{"go-redis", true}, {"lean", false}} {
			b.Run(fmt.Sprintf("keys=%d/conn=%s", n, mode.name), func(b *testing.B) {
				s, err := New(Config{URL: "redis://" + node.Addr, Timeout: 5 * time.Second, goRedisPipes: mode.goRedis})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				if s.lean == mode.goRedis {
					b.Fatalf("store lean = %v, want %v", s.lean, !mode.goRedis)
				}
				reqs := make([]limit.Request, n)
				out := make([]limit.Result, n)
				for i := range reqs {
					reqs[i] = limit.Request{Cost: 1, Policy: p}
				}
				j := 0
				measure(b, func() {
					for i := range reqs {
						reqs[i].Key = keys[j%len(keys)]
						j++
					}
					s.Do(context.Background(), reqs, out)
					for i := range out {
						if out[i].Err != nil || !out[i].Allowed {
							b.Fatalf("result %d: %+v", i, out[i])
						}
					}
				}, float64(n))
			})
		}
	}
}
