package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// tlsServer starts a TLS server with the test certificates; cfg.TLS is
// filled in, and mutate may change it (for client certificates).
func tlsServer(t *testing.T, cfg Config, mutate func(*tls.Config, *localredis.TLSFiles)) (*Server, string, *localredis.TLSFiles) {
	t.Helper()
	files := redistest.NewTLSFiles(t)
	tc, err := files.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(tc, files)
	}
	cfg.TLS = tc
	srv, addr := start(t, cfg)
	return srv, addr, files
}

func clientTLS(t *testing.T, files *localredis.TLSFiles, withCert bool) *tls.Config {
	t.Helper()
	tc, err := files.ClientConfig(withCert)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

func TestTLSListener(t *testing.T) {
	t.Parallel()
	_, addr, files := tlsServer(t, Config{RequirePass: "pw"}, nil)
	ctx := context.Background()
	rdb := client(t, addr, func(o *redis.Options) { o.TLSConfig = clientTLS(t, files, false); o.Password = "pw" })
	res, err := rdb.Do(ctx, "RL.TAKE", "k").Slice()
	if err != nil || len(res) != 6 || res[0] != int64(1) {
		t.Fatalf("RL.TAKE over TLS = %v, %v", res, err)
	}
	// A pipeline over TLS is still one batch and answered in order.
	pipe := rdb.Pipeline()
	for range 5 {
		pipe.Do(ctx, "RL.TAKE", "p")
	}
	cmds, err := pipe.Exec(ctx)
	if err != nil || len(cmds) != 5 {
		t.Fatalf("pipeline over TLS: %v", err)
	}

	plain := client(t, addr, func(o *redis.Options) { o.DialTimeout = time.Second; o.ReadTimeout = time.Second })
	if err := plain.Ping(ctx).Err(); err == nil {
		t.Error("a plain-text client got an answer from the TLS listener")
	}
	untrusted := client(t, addr, func(o *redis.Options) { o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12} })
	if err := untrusted.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client that does not trust the CA: %v, want a certificate error", err)
	}
	old := client(t, addr, func(o *redis.Options) {
		o.TLSConfig = clientTLS(t, files, false)
		o.TLSConfig.MaxVersion = tls.VersionTLS11
		o.TLSConfig.MinVersion = tls.VersionTLS10
	})
	if err := old.Ping(ctx).Err(); err == nil {
		t.Error("a TLS 1.1 client was served")
	}
}

func TestTLSClientCertificates(t *testing.T) {
	t.Parallel()
	_, addr, files := tlsServer(t, Config{}, func(tc *tls.Config, f *localredis.TLSFiles) {
		tc.ClientAuth = tls.RequireAndVerifyClientCert
		tc.ClientCAs = f.Pool
	})
	ctx := context.Background()
	with := client(t, addr, func(o *redis.Options) { o.TLSConfig = clientTLS(t, files, true) })
	if res, err := with.Do(ctx, "RL.TAKE", "k").Slice(); err != nil || len(res) != 6 {
		t.Fatalf("RL.TAKE with a client certificate = %v, %v", res, err)
	}
	without := client(t, addr, func(o *redis.Options) { o.TLSConfig = clientTLS(t, files, false) })
	if err := without.Ping(ctx).Err(); err == nil {
		t.Error("a client without a certificate was served")
	}
}

// TestTLSHandshakeTimeout: a client that connects and never finishes the
// handshake is dropped after RequestTimeout, and its slot freed, even with
// no IdleTimeout.
func TestTLSHandshakeTimeout(t *testing.T) {
	t.Parallel()
	srv, addr, _ := tlsServer(t, Config{RequestTimeout: 200 * time.Millisecond}, nil)
	for _, hello := range []string{"", "\x16\x03\x01\x02\x00\x01"} {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if hello != "" {
			if _, err := io.WriteString(nc, hello); err != nil {
				t.Fatal(err)
			}
		}
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		start := time.Now()
		_, err = io.Copy(io.Discard, nc)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("handshake %q: the server kept the connection open for 5s", hello)
		}
		if d := time.Since(start); d < 100*time.Millisecond {
			t.Errorf("handshake %q: closed after %v, before RequestTimeout", hello, d)
		}
		nc.Close()
	}
	waitFor(t, "no connected clients", func() bool { return srv.Stats().ConnectedClients == 0 })
}

// TestTLSGuard: the guard's size cap applies to the decrypted requests.
func TestTLSGuard(t *testing.T) {
	t.Parallel()
	_, addr, files := tlsServer(t, Config{MaxRequestBytes: 256, MaxKeyBytes: 16}, nil)
	nc, err := tls.Dial("tcp", addr, clientTLS(t, files, false))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	rd := bufio.NewReader(nc)
	if _, err := io.WriteString(nc, "PING\r\n"); err != nil {
		t.Fatal(err)
	}
	if got, err := readRESP(rd); err != nil || got != "+PONG" {
		t.Fatalf("PING -> %q, %v", got, err)
	}
	if _, err := io.WriteString(nc, "*2\r\n$7\r\nRL.TAKE\r\n$1000\r\n"+strings.Repeat("x", 1000)+"\r\n"); err != nil {
		t.Fatal(err)
	}
	if got, err := readRESP(rd); err != nil || got != "-"+errProtoTooLarge {
		t.Fatalf("oversized request -> %q, %v", got, err)
	}
	if _, err := io.Copy(io.Discard, rd); err != nil && !isReset(err) {
		t.Fatalf("connection not closed after the protocol error: %v", err)
	}
}

func TestTLSConfigNeedsCertificate(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{Decider: newFake(1), TLS: &tls.Config{}}); err == nil {
		t.Fatal("New accepted a TLS config without a certificate")
	}
}

// Clients over MaxClients are turned away off the accept loop: over TLS
// that answer needs a handshake, and 20 clients that never send a
// ClientHello (a second each, in the old accept loop) must not hold up the
// answer to the next one. The 10 s read deadline is a liveness bound, half
// of what 20 stalled handshakes would take in line.
func TestTLSOverMaxClientsDoesNotStallAccept(t *testing.T) {
	t.Parallel()
	srv, addr, files := tlsServer(t, Config{MaxClients: 1}, nil)
	holder := client(t, addr, func(o *redis.Options) { o.TLSConfig = clientTLS(t, files, false); o.PoolSize = 1 })
	if err := holder.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
	}
	// Queued behind the 20 in the listen backlog.
	deadline := time.Now().Add(10 * time.Second)
	tc, err := tls.DialWithDialer(&net.Dialer{Deadline: deadline}, "tcp", addr, clientTLS(t, files, false))
	if err != nil {
		t.Fatalf("TLS dial while full: %v (rejected so far: %d)", err, srv.Stats().RejectedClients)
	}
	defer tc.Close()
	_ = tc.SetDeadline(deadline)
	line, err := bufio.NewReader(tc).ReadString('\n')
	if err != nil || line != "-ERR max number of clients reached\r\n" {
		t.Fatalf("over the limit: %q %v", line, err)
	}
}
