package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/limit"
)

// fakeDecider is a deterministic stand-in for the limiter (which lives in
// another package): every key has a bucket of limit tokens that never
// refills. Special keys misbehave on purpose:
//
//	"panic"       Decide panics
//	"nopolicy*"   out.Err wraps limit.ErrNoPolicy
//	"fail"        out.Err is a two-line error
//	"slow"        Decide blocks until release is closed (when not nil)
type fakeDecider struct {
	limit int64

	mu      sync.Mutex
	used    map[string]int64
	batches []int

	takes   atomic.Int64
	entered chan struct{} // receives when a "slow" request starts waiting
	release chan struct{}
}

func newFake(burst int64) *fakeDecider {
	return &fakeDecider{limit: burst, used: map[string]int64{}}
}

func (f *fakeDecider) Decide(ctx context.Context, reqs []limit.Request, out []limit.Result) {
	f.mu.Lock()
	f.batches = append(f.batches, len(reqs))
	f.mu.Unlock()
	for i, r := range reqs {
		switch {
		case r.Key == "panic":
			panic("fake decider panics for key 'panic'")
		case strings.HasPrefix(r.Key, "nopolicy"):
			out[i].Err = fmt.Errorf("limiter: %w", limit.ErrNoPolicy)
			continue
		case r.Key == "fail":
			out[i].Err = errors.New("store said\r\nno")
			continue
		case r.Key == "slow" && f.release != nil:
			if f.entered != nil {
				f.entered <- struct{}{}
			}
			select {
			case <-f.release:
			case <-ctx.Done():
				out[i].Err = ctx.Err()
				continue
			}
		}
		if r.Op == limit.OpTake {
			f.takes.Add(1)
		}
		f.mu.Lock()
		used := f.used[r.Key]
		allowed := r.Cost <= f.limit-used
		if allowed && r.Op == limit.OpTake {
			used += r.Cost
			f.used[r.Key] = used
		}
		f.mu.Unlock()
		res := limit.Result{
			Allowed:      allowed,
			Limit:        f.limit,
			Remaining:    f.limit - used,
			RetryAfterMs: -1,
			ResetAfterMs: used * 1000,
			DecidedBy:    limit.ByStore,
		}
		if !allowed && r.Cost <= f.limit {
			res.RetryAfterMs = 1000
		}
		out[i] = res
	}
}

func (f *fakeDecider) Reset(_ context.Context, key string) (bool, error) {
	if key == "fail" {
		return false, errors.New("reset failed")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.used[key]
	delete(f.used, key)
	return ok, nil
}

// forget drops all state, so that long fuzzing runs stay small.
func (f *fakeDecider) forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.used)
	f.batches = f.batches[:0]
}

// maxBatch returns the largest batch Decide has seen.
func (f *fakeDecider) maxBatch() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := 0
	for _, n := range f.batches {
		m = max(m, n)
	}
	return m
}

// start runs a server for cfg (Decider defaults to a fake with limit 10) on
// a free loopback port and shuts it down when the test ends.
func start(t testing.TB, cfg Config) (*Server, string) {
	t.Helper()
	if cfg.Decider == nil {
		cfg.Decider = newFake(10)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return srv, ln.Addr().String()
}

// client returns a go-redis client for addr, closed at the end of the test.
func client(t testing.TB, addr string, opts ...func(*redis.Options)) *redis.Client {
	t.Helper()
	o := &redis.Options{Addr: addr, MaxRetries: -1}
	for _, f := range opts {
		f(o)
	}
	rdb := redis.NewClient(o)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// rawConn is a plain TCP connection for byte-level tests.
type rawConn struct {
	t  testing.TB
	nc net.Conn
	rd *bufio.Reader
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, nc: nc, rd: bufio.NewReader(nc)}
}

func (r *rawConn) send(s string) {
	r.t.Helper()
	if _, err := io.WriteString(r.nc, s); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// readReply reads one RESP reply and returns it in a compact text form:
// "+OK", "-ERR ...", ":1", "$hi" (or "$nil"), "[a b]" for arrays.
func (r *rawConn) readReply() string {
	r.t.Helper()
	s, err := readRESP(r.rd)
	if err != nil {
		r.t.Fatalf("read reply: %v", err)
	}
	return s
}

// expectClosed asserts the server closes the connection (after any bytes
// still in flight).
func (r *rawConn) expectClosed() {
	r.t.Helper()
	_, err := io.Copy(io.Discard, r.rd)
	if err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		r.t.Fatalf("connection was not closed: %v", err)
	}
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && !ne.Timeout()
}

// readRESP parses one RESP2 reply strictly, or RESP3's map, set and null;
// it is also the fuzz target's check that every reply is well-formed.
func readRESP(rd *bufio.Reader) (string, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return "", fmt.Errorf("bad line %q", line)
	}
	body := line[1 : len(line)-2]
	if strings.ContainsAny(body, "\r\n") {
		return "", fmt.Errorf("CR or LF inside %q", line)
	}
	switch line[0] {
	case '+', '-':
		return line[:1] + body, nil
	case ':':
		if _, err := strconv.ParseInt(body, 10, 64); err != nil {
			return "", fmt.Errorf("bad integer %q", line)
		}
		return line[:1] + body, nil
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 {
			return "", fmt.Errorf("bad bulk length %q", line)
		}
		if n == -1 {
			return "$nil", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return "", err
		}
		if string(buf[n:]) != "\r\n" {
			return "", fmt.Errorf("bulk not followed by CRLF")
		}
		return "$" + string(buf[:n]), nil
	case '*', '~', '%':
		// RESP3's set (~n) and map (%n pairs) after HELLO 3: "~[a b]" and
		// "%{k v}".
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 || (n < 0 && line[0] != '*') {
			return "", fmt.Errorf("bad aggregate length %q", line)
		}
		elems := n
		if line[0] == '%' {
			elems = 2 * n
		}
		parts := make([]string, 0, max(elems, 0))
		for range elems {
			p, err := readRESP(rd)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		switch line[0] {
		case '~':
			return "~[" + strings.Join(parts, " ") + "]", nil
		case '%':
			return "%{" + strings.Join(parts, " ") + "}", nil
		}
		return "[" + strings.Join(parts, " ") + "]", nil
	case '_':
		if body != "" {
			return "", fmt.Errorf("bad null %q", line)
		}
		return "_", nil
	}
	return "", fmt.Errorf("bad reply type %q", line)
}

// waitFor polls cond until it holds or the test's patience runs out.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

var _ MultiDecider = (*fakeDecider)(nil)

// MTake peeks every key and takes them all only when every peek allows.
func (f *fakeDecider) MTake(ctx context.Context, reqs []limit.Request, out []limit.Result) (bool, error) {
	for i := range reqs {
		reqs[i].Op = limit.OpPeek
	}
	f.Decide(ctx, reqs, out)
	for i := range out {
		if errors.Is(out[i].Err, limit.ErrNoPolicy) {
			return false, fmt.Errorf("%w '%s'", limit.ErrNoPolicy, reqs[i].Key) // as the limiter says it
		}
		if out[i].Err != nil {
			return false, out[i].Err
		}
		if !out[i].Allowed {
			return false, nil
		}
	}
	for i := range reqs {
		reqs[i].Op = limit.OpTake
	}
	f.Decide(ctx, reqs, out)
	return true, nil
}

// ThrottlePolicy makes a GCRA policy; the fake ignores it beyond Limit.
func (f *fakeDecider) ThrottlePolicy(key string, maxBurst, count, period int64) (*limit.Policy, error) {
	if maxBurst > 1000 {
		return nil, errors.New("max_burst too large for the fake")
	}
	return &limit.Policy{Name: "cl", Algorithm: limit.GCRA, Limit: maxBurst + 1, Rate: count}, nil
}
