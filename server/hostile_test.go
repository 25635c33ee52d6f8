package server

import (
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// heapInUse returns HeapAlloc and StackInuse after a full collection.
func heapInUse() (heap, stack uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.StackInuse
}

// pingLoop sends PING on its own connection until stop is closed and
// counts the replies; a failure is reported through errc.
func pingLoop(t *testing.T, addr string, stop <-chan struct{}, pongs *atomic.Int64) <-chan error {
	t.Helper()
	r := dialRaw(t, addr)
	_ = r.nc.SetDeadline(time.Now().Add(time.Minute))
	errc := make(chan error, 1)
	go func() {
		defer close(errc)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := io.WriteString(r.nc, "PING\r\n"); err != nil {
				errc <- err
				return
			}
			got, err := readRESP(r.rd)
			if err != nil || got != "+PONG" {
				errc <- fmt.Errorf("PING = %q, %v", got, err)
				return
			}
			pongs.Add(1)
		}
	}()
	return errc
}

func TestNonReaderIsDisconnected(t *testing.T) {
	t.Parallel()
	const writeTimeout = 300 * time.Millisecond
	srv, addr := start(t, Config{WriteTimeout: writeTimeout})

	stop := make(chan struct{})
	var pongs atomic.Int64
	errc := pingLoop(t, addr, stop, &pongs)
	waitFor(t, "the normal client's first reply", func() bool { return pongs.Load() > 0 })

	// A small receive buffer so that the replies back up in the kernel
	// soon; the client never reads them.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
	}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	heap0, _ := heapInUse()
	began := time.Now()
	// At least 100,000 requests: the server blocks only once the kernel's
	// socket buffers (up to several MiB on loopback) are full of replies,
	// so keep sending until the server closes the connection.
	const atMost = 2_000_000
	sent := make(chan int, 1)
	go func() {
		_ = nc.SetWriteDeadline(time.Now().Add(time.Minute))
		req := strings.Repeat("*2\r\n$7\r\nRL.TAKE\r\n$3\r\nkey\r\n", 1000)
		i := 0
		for ; i < atMost; i += 1000 {
			if _, err := io.WriteString(nc, req); err != nil {
				break
			}
		}
		sent <- i
	}()
	failed := func() {
		select {
		case err := <-errc:
			t.Fatalf("normal client: %v", err)
		default:
		}
	}

	var peak uint64
	waitFor(t, "the non-reader to be disconnected", func() bool {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
		failed()
		return srv.Stats().ConnectedClients == 1
	})
	took := time.Since(began)
	pongsThen := pongs.Load()
	waitFor(t, "the normal client to keep getting replies", func() bool {
		failed()
		return pongs.Load() > pongsThen
	})
	close(stop)
	if err := <-errc; err != nil {
		t.Fatalf("normal client: %v", err)
	}
	written := <-sent
	t.Logf("non-reader disconnected %v after it began sending (WriteTimeout %v); %d requests written before; peak heap growth %d KiB; normal client got %d replies meanwhile",
		took.Round(time.Millisecond), writeTimeout, written, (int64(peak)-int64(heap0))>>10, pongsThen)
	if growth := int64(peak) - int64(heap0); growth > 64<<20 {
		t.Errorf("heap grew by %d MiB while a client did not read", growth>>20)
	}
}

func TestLargeRepliesAreWrittenInChunks(t *testing.T) {
	t.Parallel()
	_, addr := start(t, Config{MaxOutputBytes: 4096})
	r := dialRaw(t, addr)
	// Each ECHO reply is ~1 KiB, so the pipeline's replies are written in
	// several chunks; the client must still get all of them, in order.
	payload := strings.Repeat("x", 1000)
	var b strings.Builder
	for i := range 50 {
		fmt.Fprintf(&b, "ECHO %d%s\r\n", i, payload)
	}
	r.send(b.String())
	for i := range 50 {
		if got, want := r.readReply(), fmt.Sprintf("$%d%s", i, payload); got != want {
			t.Fatalf("reply %d = %.20q…, want %.20q…", i, got, want)
		}
	}
}

func TestTrickledRequestIsClosed(t *testing.T) {
	t.Parallel()
	const requestTimeout = 300 * time.Millisecond
	_, addr := start(t, Config{RequestTimeout: requestTimeout})

	// A client that idles before its request is not affected: the timeout
	// runs from the request's first byte. The sleep lets the time pass
	// that the server must not count.
	idle := dialRaw(t, addr)
	time.Sleep(2 * requestTimeout)
	idle.send("PING\r\n")
	if got := idle.readReply(); got != "+PONG" {
		t.Fatalf("PING after idling = %q", got)
	}

	r := dialRaw(t, addr)
	req := "*2\r\n$4\r\nECHO\r\n$100\r\n" + strings.Repeat("x", 100) + "\r\n"
	began := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := range len(req) {
			if _, err := io.WriteString(r.nc, req[i:i+1]); err != nil {
				return
			}
			<-tick.C
		}
	}()
	got, err := io.ReadAll(r.rd)
	took := time.Since(began)
	if err != nil && !isReset(err) {
		t.Fatalf("read: %v", err)
	}
	if len(got) > 0 {
		t.Errorf("the trickling client got %q, want nothing", got)
	}
	if took < requestTimeout {
		t.Errorf("closed after %v, before RequestTimeout %v", took, requestTimeout)
	}
	t.Logf("trickling client closed after %v (RequestTimeout %v)", took.Round(time.Millisecond), requestTimeout)
	<-done
}

// raiseFDLimit makes room for n open files if it can, else as many as the
// hard limit allows, and returns how many it got.
func raiseFDLimit(t *testing.T, n uint64) uint64 {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("getrlimit: %v", err)
	}
	if lim.Cur >= n {
		return n
	}
	want := lim
	want.Cur = n
	want.Max = max(lim.Max, n)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		// Not root: settle for the hard limit.
		want = syscall.Rlimit{Cur: lim.Max, Max: lim.Max}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			t.Fatalf("setrlimit to the hard limit %d: %v", lim.Max, err)
		}
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) })
	return want.Cur
}

// Not parallel: it counts on the process's open files and heap.
func TestTenThousandIdleConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 20,000 sockets")
	}
	// Both ends of every connection live in this process: 10,000 of them
	// need 20,000 descriptors, more than some machines' hard limit (20,000
	// here), where the test uses as many as fit and says so.
	n := 10_000
	if got := raiseFDLimit(t, uint64(2*n+300)); got < uint64(2*n+300) {
		n = int(got-300) / 2
		t.Logf("RLIMIT_NOFILE hard limit %d: %d idle connections instead of 10,000", got, n)
	}
	srv, addr := start(t, Config{MaxClients: n + 1})

	heap0, stack0 := heapInUse()
	conns := make([]net.Conn, n)
	var wg sync.WaitGroup
	var dialErr atomic.Value
	const workers = 16
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				nc, err := net.Dial("tcp", addr)
				if err != nil {
					dialErr.CompareAndSwap(nil, err)
					return
				}
				conns[i] = nc
			}
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, nc := range conns {
			if nc != nil {
				nc.Close()
			}
		}
	})
	if err, _ := dialErr.Load().(error); err != nil {
		t.Fatalf("dial: %v", err)
	}
	waitFor(t, "10,000 connected clients", func() bool { return srv.Stats().ConnectedClients == int64(n) })
	heap1, stack1 := heapInUse()
	t.Logf("per idle connection, server and client side together: heap %d B, goroutine stacks %d B",
		(int64(heap1)-int64(heap0))/int64(n), (int64(stack1)-int64(stack0))/int64(n))

	r := dialRaw(t, addr)
	r.send("RL.TAKE k\r\n")
	if got := r.readReply(); !strings.HasPrefix(got, "[:1 ") {
		t.Errorf("RL.TAKE with 10,000 idle connections = %q", got)
	}
	r.nc.Close()

	for i, nc := range conns {
		nc.Close()
		conns[i] = nil
	}
	waitFor(t, "all clients gone", func() bool { return srv.Stats().ConnectedClients == 0 })
}

// Not parallel: it counts goroutines.
func TestConnectFlood(t *testing.T) {
	const cycles, workers = 20_000, 8
	base := runtime.NumGoroutine()
	srv, addr := start(t, Config{})
	var wg sync.WaitGroup
	var failed atomic.Int64
	var firstErr atomic.Value
	for w := range workers {
		wg.Go(func() {
			for i := w; i < cycles; i += workers {
				nc, err := net.Dial("tcp", addr)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				// Reset rather than FIN, so the client side leaves no
				// TIME_WAIT behind; every other client also sends a
				// command it never reads the reply of.
				_ = nc.(*net.TCPConn).SetLinger(0)
				if i%2 == 0 {
					_, _ = io.WriteString(nc, "PING\r\n")
				}
				nc.Close()
			}
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		t.Errorf("%d of %d dials failed, the first: %v", failed.Load(), cycles, err)
	}
	waitFor(t, "all clients gone", func() bool { return srv.Stats().ConnectedClients == 0 })
	waitFor(t, "goroutines back near the baseline", func() bool { return runtime.NumGoroutine() <= base+8 })
	st := srv.Stats()
	if st.Panics != 0 {
		t.Errorf("Panics = %d", st.Panics)
	}
	t.Logf("%d connections accepted, %d goroutines now, %d before", st.TotalConnections, runtime.NumGoroutine(), base)
}
