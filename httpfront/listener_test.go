package httpfront

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serveOn runs s on a loopback port until the test ends and returns its address.
func serveOn(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
		}
	})
	return ln.Addr().String()
}

// The limits net/http enforces before the handler: header size, and the
// time a client may take to send its headers.
func TestListenerLimits(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{MaxHeaderBytes: 1024, ReadHeaderTimeout: 300 * time.Millisecond})
	addr := serveOn(t, s)
	c := &http.Client{Timeout: 10 * time.Second}

	resp, err := c.Get("http://" + addr + "/v1/check?key=three:ok")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("RateLimit") == "" {
		t.Fatalf("a plain check: %d %v", resp.StatusCode, resp.Header)
	}

	// Headers over MaxHeaderBytes (plus net/http's 4 KiB of slack): 431.
	req, _ := http.NewRequest("GET", "http://"+addr+"/v1/check?key=three:big", nil)
	req.Header.Set("X-Filler", strings.Repeat("x", 8<<10))
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("8 KiB of headers over a 1 KiB limit: %d, want 431", resp.StatusCode)
	}

	// A client that starts its headers and never ends them is cut off by
	// ReadHeaderTimeout: the read below ends (EOF or a 408), well before
	// its own 10 s deadline.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /v1/check?key=three:slow HTTP/1.1\r\nHost: x\r\nX-Slow: "); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(10 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("a trickled header held its connection for %v", time.Since(start))
	}
	if line != "" && !strings.Contains(line, "408") {
		t.Errorf("a trickled header answered %q, want a 408 or a closed connection", line)
	}
}
