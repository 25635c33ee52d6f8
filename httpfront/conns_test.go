package httpfront

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// A flood of connections costs no more than MaxConnections being served:
// past the cap a connection waits in the backlog, unanswered, and is
// served as soon as one of the others closes.
func TestMaxConnections(t *testing.T) {
	s := newServer(t, Config{MaxConnections: 2})
	addr := serveOn(t, s)
	get := "GET /v1/check?key=win:conns HTTP/1.1\r\nHost: x\r\n\r\n"
	var held []net.Conn
	for range 2 { // two connections served, kept open (keep-alive)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte(get)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		held = append(held, c)
	}
	third, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if _, err := third.Write([]byte(get)); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(third)
	// The negative: no answer while two are served (a bounded wait).
	_ = third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := rd.Peek(1); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a third connection was answered past MaxConnections 2 (err %v)", err)
	}
	held[0].Close()
	_ = third.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(rd, nil)
	if err != nil {
		t.Fatalf("the third connection after one closed: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the third connection: %s, want 200", resp.Status)
	}
}
