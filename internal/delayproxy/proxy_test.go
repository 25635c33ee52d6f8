package delayproxy_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/delayproxy"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// slack is how long a test waits for what must happen soon: generous, the
// machine is shared.
const slack = 10 * time.Second

func newProxy(t *testing.T, cfg delayproxy.Config) *delayproxy.Proxy {
	t.Helper()
	p, err := delayproxy.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

func newClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1, ReadTimeout: slack})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// dial opens a raw connection to addr.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, slack)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ping writes one PING on c and reads the reply within d.
func ping(c net.Conn, r *bufio.Reader, d time.Duration) (string, error) {
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return "", err
	}
	return readLine(c, r, d)
}

func readLine(c net.Conn, r *bufio.Reader, d time.Duration) (string, error) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	line, err := r.ReadString('\n')
	return strings.TrimSpace(line), err
}

func TestRoundTripCostsTwiceTheDelay(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	const oneWay = 25 * time.Millisecond
	p := newProxy(t, delayproxy.Config{Target: n.Addr, Delay: oneWay})
	c := newClient(t, p.Addr())
	ctx := t.Context()
	for _, d := range []time.Duration{oneWay, 2 * oneWay} {
		p.SetDelay(d)
		for range 5 {
			began := time.Now()
			if err := c.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if rtt := time.Since(began); rtt < 2*d {
				t.Errorf("one way %v: PING took %v, want at least %v", d, rtt, 2*d)
			}
		}
	}
}

// A delay is latency, not a throughput limit: many requests in flight at
// once on one connection all cross in about one round trip, and a payload
// larger than one read crosses in a few, not one per chunk.
func TestPipelinedThroughputIsNotOneRequestPerRoundTrip(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	const oneWay = 40 * time.Millisecond
	p := newProxy(t, delayproxy.Config{Target: n.Addr, Delay: oneWay})
	c := newClient(t, p.Addr())
	ctx := t.Context()
	rtt := 2 * oneWay

	t.Run("1000 pipelined PINGs", func(t *testing.T) {
		const count = 1000
		began := time.Now()
		cmds, err := c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			for range count {
				pipe.Ping(ctx)
			}
			return nil
		})
		rounds := float64(time.Since(began)) / float64(rtt)
		if err != nil {
			t.Fatal(err)
		}
		pongs := 0
		for _, cmd := range cmds {
			if cmd.(*redis.StatusCmd).Val() == "PONG" {
				pongs++
			}
		}
		t.Logf("%d PONGs for %d PINGs in %.1f round trips of %v", pongs, count, rounds, rtt)
		if pongs != count {
			t.Errorf("got %d PONGs, want %d", pongs, count)
		}
		// One request per round trip would be 1000.
		if rounds > count/20 {
			t.Errorf("%d pipelined PINGs took %.1f round trips, want well under %d", count, rounds, count)
		}
	})

	t.Run("PINGs written one by one", func(t *testing.T) {
		// Each PING its own write: the proxy reads many small chunks,
		// each of which must not wait for the one before to leave.
		const count = 1000
		conn := dial(t, p.Addr())
		r := bufio.NewReader(conn)
		began := time.Now()
		werr := make(chan error, 1)
		go func() {
			for range count {
				if _, err := conn.Write([]byte("PING\r\n")); err != nil {
					werr <- err
					return
				}
			}
			werr <- nil
		}()
		for i := range count {
			line, err := readLine(conn, r, slack)
			if err != nil || line != "+PONG" {
				t.Fatalf("reply %d: %q, %v", i, line, err)
			}
		}
		if err := <-werr; err != nil {
			t.Fatal(err)
		}
		rounds := float64(time.Since(began)) / float64(rtt)
		t.Logf("%d PINGs written one by one answered in %.1f round trips", count, rounds)
		if rounds > count/20 {
			t.Errorf("%d PINGs took %.1f round trips, want well under %d", count, rounds, count)
		}
	})

	t.Run("4 MiB value", func(t *testing.T) {
		// 128 reads of 32 KiB each way: a proxy that sent one read per
		// delay would hold one read at a time. This one keeps reading
		// while earlier chunks wait, so far more is in flight at once.
		value := bytes.Repeat([]byte("sluice-"), 4<<20/7)
		stop := make(chan struct{})
		peak := make(chan int64)
		go func() {
			var most int64
			for {
				most = max(most, p.Held())
				select {
				case <-stop:
					peak <- most
					return
				case <-time.After(time.Millisecond):
				}
			}
		}()
		began := time.Now()
		err := c.Set(ctx, "big", value, 0).Err()
		var got []byte
		if err == nil {
			got, err = c.Get(ctx, "big").Bytes()
		}
		rounds := float64(time.Since(began)) / float64(rtt)
		close(stop)
		most := <-peak
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("SET and GET of %d bytes in %.1f round trips; at most %d bytes in flight", len(value), rounds, most)
		if !bytes.Equal(got, value) {
			t.Fatalf("GET returned %d bytes, not the %d written", len(got), len(value))
		}
		const oneRead = 32 << 10
		if most < 4*oneRead {
			t.Errorf("at most %d bytes were in flight, want well over one read (%d): the proxy must keep reading while chunks wait", most, oneRead)
		}
	})
}

func TestStallHoldsBytesUntilReleased(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	p := newProxy(t, delayproxy.Config{Target: n.Addr, Delay: 5 * time.Millisecond})
	conn := dial(t, p.Addr())
	r := bufio.NewReader(conn)
	if line, err := ping(conn, r, slack); err != nil || line != "+PONG" {
		t.Fatalf("before the stall: %q, %v", line, err)
	}

	p.Stall(true)
	_, err := ping(conn, r, 300*time.Millisecond)
	if !isTimeout(err) {
		t.Fatalf("PING through a stalled proxy: %v, want a timeout", err)
	}
	fresh := dial(t, p.Addr()) // accepted, and held too
	fr := bufio.NewReader(fresh)
	if _, err := ping(fresh, fr, 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("PING on a new connection through a stalled proxy: %v, want a timeout", err)
	}

	p.Stall(false)
	// What was held is delivered, in order, on the same connections.
	for name, c := range map[string]struct {
		conn net.Conn
		r    *bufio.Reader
	}{"old": {conn, r}, "new": {fresh, fr}} {
		if line, err := readLine(c.conn, c.r, slack); err != nil || line != "+PONG" {
			t.Errorf("%s connection after the stall: %q, %v; want the held PING answered", name, line, err)
		}
		if line, err := ping(c.conn, c.r, slack); err != nil || line != "+PONG" {
			t.Errorf("%s connection after the stall, a new PING: %q, %v", name, line, err)
		}
	}
}

func TestCutResetsOldAndNewConnections(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	p := newProxy(t, delayproxy.Config{Target: n.Addr, Delay: 5 * time.Millisecond})
	conn := dial(t, p.Addr())
	r := bufio.NewReader(conn)
	if line, err := ping(conn, r, slack); err != nil || line != "+PONG" {
		t.Fatalf("before the cut: %q, %v", line, err)
	}

	p.Cut(true)
	if _, err := readLine(conn, r, slack); err == nil || isTimeout(err) {
		t.Errorf("an open connection after Cut: %v, want a reset or EOF, not a timeout", err)
	}
	if fresh, err := net.DialTimeout("tcp", p.Addr(), slack); err == nil {
		_, err = ping(fresh, bufio.NewReader(fresh), slack)
		_ = fresh.Close()
		if err == nil || isTimeout(err) {
			t.Errorf("a new connection during the cut: %v, want a reset or EOF, not a timeout", err)
		}
	}
	// Cut tears every connection down; new ones are reset as accepted.
	deadline := time.Now().Add(slack)
	for p.Conns() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("Conns() = %d during the cut, want 0", p.Conns())
		}
		time.Sleep(10 * time.Millisecond)
	}

	p.Cut(false)
	again := dial(t, p.Addr())
	if line, err := ping(again, bufio.NewReader(again), slack); err != nil || line != "+PONG" {
		t.Errorf("after the cut: %q, %v", line, err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
}

// sink accepts connections and counts the bytes they send.
func sink(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var got atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				n, _ := io.Copy(io.Discard, c)
				got.Add(n)
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return ln.Addr().String(), &got
}

// A sender faster than the proxy forwards meets backpressure, not an
// unbounded buffer.
func TestHeldBytesAreBounded(t *testing.T) {
	t.Parallel()
	target, got := sink(t)
	const maxInFlight = 64 << 10
	p := newProxy(t, delayproxy.Config{Target: target, Delay: time.Millisecond, MaxInFlight: maxInFlight})
	p.Stall(true)
	conn := dial(t, p.Addr())
	const total = 32 << 20
	wrote := make(chan error, 1)
	go func() {
		_, err := conn.Write(make([]byte, total))
		if err == nil {
			err = conn.(*net.TCPConn).CloseWrite()
		}
		wrote <- err
	}()

	deadline := time.Now().Add(slack)
	for p.Held() < maxInFlight/2 {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled proxy holds %d bytes after %v, want at least %d", p.Held(), slack, maxInFlight/2)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var most int64
	for range 20 { // samples while the sender pushes
		most = max(most, p.Held())
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("stalled: at most %d bytes held of %d sent (MaxInFlight %d)", most, total, maxInFlight)
	if most > maxInFlight {
		t.Errorf("the proxy held %d bytes, want at most MaxInFlight = %d", most, maxInFlight)
	}

	p.Stall(false)
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(slack):
		t.Fatalf("the %d bytes were not all sent %v after the stall ended", total, slack)
	}
	deadline = time.Now().Add(slack)
	for got.Load() != total || p.Held() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the target got %d bytes of %d, %d still held", got.Load(), total, p.Held())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRefusedTargetResetsTheClient(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := ln.Addr().String()
	_ = ln.Close()
	p := newProxy(t, delayproxy.Config{Target: closedAddr})
	conn, err := net.DialTimeout("tcp", p.Addr(), slack)
	if err == nil {
		// The reset may come before the dial returns, or after.
		_, err = ping(conn, bufio.NewReader(conn), slack)
		_ = conn.Close()
	}
	if err == nil || isTimeout(err) {
		t.Errorf("PING through a proxy whose target refuses: %v, want a reset or EOF", err)
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  delayproxy.Config
		want string
	}{
		{delayproxy.Config{}, "Target is required"},
		{delayproxy.Config{Target: "127.0.0.1:1", Delay: -time.Second}, "Delay must not be negative"},
		{delayproxy.Config{Target: "127.0.0.1:1", MaxInFlight: -1}, "MaxInFlight must not be negative"},
		{delayproxy.Config{Target: "127.0.0.1:1", DialTimeout: -1}, "DialTimeout must not be negative"},
		{delayproxy.Config{Target: "127.0.0.1:1", Listen: "127.0.0.1:99999"}, "invalid port"},
	} {
		p, err := delayproxy.Start(tc.cfg)
		if err == nil {
			_ = p.Close()
			t.Errorf("Start(%+v) succeeded, want an error with %q", tc.cfg, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Start(%+v) = %v, want %q in it", tc.cfg, err, tc.want)
		}
	}
}

// Not parallel: it counts the goroutines of the whole test binary.
func TestCloseEndsEveryGoroutine(t *testing.T) {
	n := redistest.NewSingle(t)
	ctx := context.Background()
	if err := n.Client().Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()

	p, err := delayproxy.New("127.0.0.1:0", n.Addr, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	for i := range 6 {
		c := dial(t, p.Addr())
		conns = append(conns, c)
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			p.Stall(true) // the rest hold their bytes
		}
	}
	deadline := time.Now().Add(slack)
	for p.Conns() != len(conns) {
		if time.Now().After(deadline) {
			t.Fatalf("the proxy forwards %d connections, want %d", p.Conns(), len(conns))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	for _, c := range conns {
		_ = c.Close()
	}
	deadline = time.Now().Add(slack)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines after Close, %d before the proxy:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Error("the proxy still accepts connections after Close")
	}
}

// echo writes ECHO msg on c and reads the reply within d.
func echo(c net.Conn, r *bufio.Reader, msg string, d time.Duration) (string, error) {
	if _, err := c.Write([]byte("ECHO " + msg + "\r\n")); err != nil {
		return "", err
	}
	if _, err := readLine(c, r, d); err != nil { // $len
		return "", err
	}
	return readLine(c, r, d)
}

// One proxy, two kinds of client told apart by their first bytes: each
// kind can be delayed, stalled and cut alone.
func TestLinksSplitClientsByTheirFirstBytes(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	classify := func(first []byte) string {
		if bytes.Contains(first, []byte("ECHO eu")) {
			return "eu"
		}
		return "us"
	}
	p := newProxy(t, delayproxy.Config{Target: n.Addr, Delay: 5 * time.Millisecond, Classify: classify})
	eu, us := p.Link("eu"), p.Link("us")
	if eu.Delay() != 5*time.Millisecond {
		t.Errorf("a new link's delay is %v, want the proxy's 5ms", eu.Delay())
	}
	type client struct {
		conn net.Conn
		r    *bufio.Reader
	}
	connect := func(name string) client {
		t.Helper()
		c := dial(t, p.Addr())
		cl := client{c, bufio.NewReader(c)}
		if got, err := echo(c, cl.r, name, slack); err != nil || got != name {
			t.Fatalf("ECHO %s: %q, %v", name, got, err)
		}
		return cl
	}
	euc, usc := connect("eu"), connect("us")

	eu.SetDelay(40 * time.Millisecond)
	began := time.Now()
	if _, err := echo(euc.conn, euc.r, "eu", slack); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < 80*time.Millisecond {
		t.Errorf("ECHO on the eu link with 40ms one way took %v, want at least 80ms", took)
	}

	eu.Stall(true)
	if _, err := echo(euc.conn, euc.r, "eu", 300*time.Millisecond); !isTimeout(err) {
		t.Errorf("ECHO on the stalled eu link: %v, want a timeout", err)
	}
	if got, err := echo(usc.conn, usc.r, "us", slack); err != nil || got != "us" {
		t.Errorf("ECHO on the us link while eu is stalled: %q, %v", got, err)
	}
	eu.Stall(false)
	got, err := readLine(euc.conn, euc.r, slack) // $2
	if err == nil {
		got, err = readLine(euc.conn, euc.r, slack)
	}
	if err != nil || got != "eu" {
		t.Errorf("the held ECHO after the stall: %q, %v", got, err)
	}

	eu.Cut(true)
	if _, err := readLine(euc.conn, euc.r, slack); err == nil || isTimeout(err) {
		t.Errorf("the eu connection after its link was cut: %v, want a reset or EOF", err)
	}
	fresh := dial(t, p.Addr()) // accepted: its link is known only from its first bytes
	if _, err := echo(fresh, bufio.NewReader(fresh), "eu", slack); err == nil || isTimeout(err) {
		t.Errorf("a new eu connection while its link is cut: %v, want a reset or EOF", err)
	}
	if got, err := echo(usc.conn, usc.r, "us", slack); err != nil || got != "us" {
		t.Errorf("ECHO on the us link while eu is cut: %q, %v", got, err)
	}
	eu.Cut(false)
	connect("eu")
	if got := us.Name(); got != "us" {
		t.Errorf("Name() = %q", got)
	}
}
