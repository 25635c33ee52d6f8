package rls_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/rls"
)

// guard bounds every wait below, so that a connection that is never
// closed fails the test instead of hanging it; it is no expectation of
// how soon anything happens.
const guard = 30 * time.Second

var apiPolicy = &limit.Policy{Name: "api", Match: "api*", Limit: 10, Rate: 1, Period: time.Second, OnStoreError: limit.FailClosed}

// countingDoor is a door config whose Decider admits everything and
// counts the calls it decides: a refused call must not reach it.
func countingDoor(decided *atomic.Int64) rls.Config {
	return rls.Config{
		Decider: countingDecider{fixedDecider{p: apiPolicy, r: limit.Result{Allowed: true, Limit: 10, Remaining: 9, RetryAfterMs: -1, DecidedBy: limit.ByStore}}, decided},
		Matcher: rls.PolicyMatcher(func(string) *limit.Policy { return apiPolicy }),
	}
}

type countingDecider struct {
	fixedDecider
	n *atomic.Int64
}

func (d countingDecider) Decide(ctx context.Context, reqs []limit.Request, out []limit.Result) {
	d.n.Add(1)
	d.fixedDecider.Decide(ctx, reqs, out)
}

func (d countingDecider) MTake(ctx context.Context, reqs []limit.Request, out []limit.Result) (bool, error) {
	d.n.Add(1)
	return d.fixedDecider.MTake(ctx, reqs, out)
}

// watched is a client's connection that says when it is gone: closed by
// the client, or ended by the server (a read fails).
type watched struct {
	net.Conn
	once sync.Once
	gone chan struct{}
}

func (c *watched) end() { c.once.Do(func() { close(c.gone) }) }

func (c *watched) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		c.end()
	}
	return n, err
}

func (c *watched) Close() error {
	c.end()
	return c.Conn.Close()
}

// dialer dials watched connections and hands each to the test.
type dialer struct{ dialed chan *watched }

func newDialer() *dialer { return &dialer{dialed: make(chan *watched, 16)} }

func (d *dialer) option() grpc.DialOption {
	return grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		nc, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		w := &watched{Conn: nc, gone: make(chan struct{})}
		d.dialed <- w
		return w, nil
	})
}

// next is the next connection dialed.
func (d *dialer) next(t *testing.T) *watched {
	t.Helper()
	select {
	case w := <-d.dialed:
		return w
	case <-time.After(guard):
		t.Fatal("no connection dialed")
		return nil
	}
}

func waitGone(t *testing.T, w *watched, what string) {
	t.Helper()
	select {
	case <-w.gone:
	case <-time.After(guard):
		t.Fatalf("%s: still open after %v", what, guard)
	}
}

func isOpen(w *watched) bool {
	select {
	case <-w.gone:
		return false
	default:
		return true
	}
}

// withToken is a context for one call, carrying the token and the
// metadata kv, and ending after guard.
func withToken(t *testing.T, token string, kv ...string) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, append([]string{"authorization", "Bearer " + token}, kv...)...)
}

// A call with more than 16 KiB of metadata is refused before anything is
// decided, whether the client heeds the door's SETTINGS (grpc-go refuses
// to send it) or not (the door resets the stream), and the door serves on.
func TestDoorRefusesLargeMetadata(t *testing.T) {
	var decided atomic.Int64
	cfg := countingDoor(&decided)
	cfg.RequirePass = "pw"
	_, addr := serveDoor(t, cfg)
	client := rlsv3.NewRateLimitServiceClient(dialDoor(t, addr))
	r := req("edge", 0, desc("k", "v"))
	served := func(what string, want int64) {
		t.Helper()
		if _, err := client.ShouldRateLimit(withToken(t, "pw"), r); err != nil {
			t.Errorf("%s: %v", what, err)
		}
		if got := decided.Load(); got != want {
			t.Errorf("%s: %d calls decided, want %d", what, got, want)
		}
		decided.Store(want)
	}

	if _, err := client.ShouldRateLimit(withToken(t, "pw", "x-pad", strings.Repeat("a", 12<<10)), r); err != nil {
		t.Fatalf("12 KiB of metadata: %v, want served", err)
	}
	_, err := client.ShouldRateLimit(withToken(t, "pw", "x-pad", strings.Repeat("a", 20<<10)), r)
	if err == nil {
		t.Errorf("20 KiB of metadata: served, want refused")
	} else {
		t.Logf("20 KiB of metadata, grpc-go client: %v", err)
	}
	if got := decided.Load(); got != 1 {
		t.Errorf("%d calls decided, want 1 (the 12 KiB call only)", got)
	}
	served("an ordinary call after", 2)

	if got := rawCall(t, addr, "pw", 20<<10); got == "answered" {
		t.Errorf("20 KiB of metadata from a client ignoring SETTINGS: answered, want the stream reset or the connection closed")
	} else {
		t.Logf("20 KiB of metadata, raw HTTP/2 client: %s", got)
	}
	if got := rawCall(t, addr, "pw", 1<<20); got == "answered" {
		t.Errorf("1 MiB of metadata from a client ignoring SETTINGS: answered, want the stream reset or the connection closed")
	} else {
		t.Logf("1 MiB of metadata, raw HTTP/2 client: %s", got)
	}
	served("an ordinary call after the raw ones", 3)
}

// rawCall sends one ShouldRateLimit by hand, with pad bytes of metadata
// whatever the door's SETTINGS say, and reports what came back:
// "answered" (response headers), "reset <code>", "goaway <code>" or
// "closed".
func rawCall(t *testing.T, addr, token string, pad int) string {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(guard))
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(nc, nc)
	_ = fr.WriteSettings()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":path", "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"},
		{":authority", addr}, {"content-type", "application/grpc"}, {"te", "trailers"},
		{"authorization", "Bearer " + token},
	} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for i := 0; i < pad; i += 4 << 10 { // fields of 4 KiB: the list is too long, no one field
		_ = enc.WriteField(hpack.HeaderField{Name: "x-pad-" + strconv.Itoa(i), Value: strings.Repeat("a", min(4<<10, pad-i))})
	}
	b := block.Bytes()
	for first := true; len(b) > 0; first = false {
		frag := b[:min(len(b), 16384)] // the default SETTINGS_MAX_FRAME_SIZE
		b = b[len(frag):]
		if first {
			err = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: frag, EndHeaders: len(b) == 0})
		} else {
			err = fr.WriteContinuation(1, len(b) == 0, frag)
		}
		if err != nil {
			return "closed" // the door stopped reading
		}
	}
	msg, err := proto.Marshal(req("edge", 0, desc("k", "v")))
	if err != nil {
		t.Fatal(err)
	}
	data := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg)))
	_ = fr.WriteData(1, true, append(data, msg...))
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return "closed"
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				return "reset " + f.ErrCode.String()
			}
		case *http2.GoAwayFrame:
			return "goaway " + f.ErrCode.String()
		case *http2.HeadersFrame:
			if f.StreamID == 1 {
				return "answered"
			}
		}
	}
}

// A connection with no call in flight for IdleTimeout is closed, and one
// that does not finish its handshake within HandshakeTimeout too.
func TestDoorClosesIdleConnections(t *testing.T) {
	var decided atomic.Int64
	cfg := countingDoor(&decided)
	cfg.IdleTimeout = 50 * time.Millisecond
	cfg.HandshakeTimeout = 50 * time.Millisecond
	_, addr := serveDoor(t, cfg)

	t.Run("idle", func(t *testing.T) {
		d := newDialer()
		client := rlsv3.NewRateLimitServiceClient(dialDoor(t, addr, d.option()))
		call(t, client, req("edge", 0, desc("k", "v")))
		waitGone(t, d.next(t), "a connection idle after one call")
		call(t, client, req("edge", 0, desc("k", "v"))) // and the door serves the next one
	})

	t.Run("handshake", func(t *testing.T) {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		w := &watched{Conn: nc, gone: make(chan struct{})}
		defer w.Close()
		go func() { // the door's SETTINGS, then the end
			for b := make([]byte, 1024); ; {
				if _, err := w.Read(b); err != nil {
					return
				}
			}
		}()
		waitGone(t, w, "a connection that never sends the HTTP/2 preface")
	})
}

// With RequirePass, a connection that has not carried the token within
// AuthTimeout is closed, whether it made no call or only failing ones;
// one that authenticated is kept; and a closed one gives its
// MaxConnections slot to the next client.
func TestDoorClosesUnauthenticatedConnections(t *testing.T) {
	var decided atomic.Int64
	cfg := countingDoor(&decided)
	cfg.RequirePass = "pw"
	cfg.AuthTimeout = 50 * time.Millisecond
	srv, addr := serveDoor(t, cfg)
	r := req("edge", 0, desc("k", "v"))

	// Authenticated first, so that its AuthTimeout ends before the others'.
	good := newDialer()
	goodClient := rlsv3.NewRateLimitServiceClient(dialDoor(t, addr, good.option()))
	if _, err := goodClient.ShouldRateLimit(withToken(t, "pw"), r); err != nil {
		t.Fatalf("with the token: %v", err)
	}
	goodConn := good.next(t)

	t.Run("no call", func(t *testing.T) {
		d := newDialer()
		dialDoor(t, addr, d.option()).Connect()
		waitGone(t, d.next(t), "a connection that makes no call")
	})
	t.Run("failing calls only", func(t *testing.T) {
		d := newDialer()
		client := rlsv3.NewRateLimitServiceClient(dialDoor(t, addr, d.option()))
		if _, err := client.ShouldRateLimit(withToken(t, "wrong"), r); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("a wrong token: %v, want Unauthenticated", err)
		}
		waitGone(t, d.next(t), "a connection whose calls all failed authentication")
	})
	if !isOpen(goodConn) {
		t.Errorf("the authenticated connection was closed")
	}
	if _, err := goodClient.ShouldRateLimit(withToken(t, "pw"), r); err != nil || !isOpen(goodConn) || len(good.dialed) != 0 {
		t.Errorf("the authenticated connection after the others were closed: %v, open %v, redialed %v", err, isOpen(goodConn), len(good.dialed) != 0)
	}
	if got := srv.AuthTimeouts(); got < 2 {
		t.Errorf("AuthTimeouts %d, want at least 2", got)
	}

	t.Run("the slot is freed", func(t *testing.T) {
		cfg := countingDoor(&decided)
		cfg.RequirePass, cfg.AuthTimeout, cfg.MaxConnections = "pw", 50*time.Millisecond, 1
		_, addr := serveDoor(t, cfg)
		// One connection that completes its handshake and then says
		// nothing holds the only slot: the door's SETTINGS prove it was
		// accepted.
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(guard))
		if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
			t.Fatal(err)
		}
		fr := http2.NewFramer(nc, nc)
		if err := fr.WriteSettings(); err != nil {
			t.Fatal(err)
		}
		if f, err := fr.ReadFrame(); err != nil {
			t.Fatalf("reading the door's SETTINGS: %v", err)
		} else if _, ok := f.(*http2.SettingsFrame); !ok {
			t.Fatalf("first frame %v, want SETTINGS", f)
		}
		// The next client is served once that one is closed.
		client := rlsv3.NewRateLimitServiceClient(dialDoor(t, addr))
		if _, err := client.ShouldRateLimit(withToken(t, "pw"), r); err != nil {
			t.Errorf("a client waiting for the slot of an unauthenticated connection: %v", err)
		}
	})
}
