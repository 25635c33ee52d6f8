package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-rl/sluice/cluster"
)

// The one load generator of RunWorkloads, for both sides: Clients callers,
// each with its own connections, each writing Depth requests in one
// pipeline (Depth in flight), then reading every reply, then the next
// batch. The keys come from the same seeded sequence on both sides; a
// door says what one key becomes on the wire and where it goes: RL.TAKE
// key 1 to sluice, or EVALSHA of the script on the key's Redis key to the
// primary that owns its slot. The replies are parsed here (raw RESP), so
// no client library's cost sits on one side only.

// door is where one side's requests go.
type door interface {
	// dial opens one caller's connections, one per address it sends to.
	dial() ([]net.Conn, error)
	// conn is the index, among dial's, of the connection a key goes to.
	conn(key string) int
	// command appends the RESP command for key to b.
	command(b []byte, key string) []byte
}

// sluiceDoor is RL.TAKE key 1 to one sluice.
type sluiceDoor struct{ addr string }

func (d sluiceDoor) dial() ([]net.Conn, error) { return dialAll([]string{d.addr}) }
func (d sluiceDoor) conn(string) int           { return 0 }
func (d sluiceDoor) command(b []byte, key string) []byte {
	return appendCommand(b, "RL.TAKE", key, "1")
}

// directDoor is EVALSHA sha 1 cluster.Key(key) args… to the primary that
// owns the key's slot: slots maps each slot to an index of primaries.
type directDoor struct {
	primaries []string
	slots     []int // len 16384
	sha       string
	args      []string
}

func (d directDoor) dial() ([]net.Conn, error) { return dialAll(d.primaries) }
func (d directDoor) conn(key string) int       { return d.slots[cluster.Slot(cluster.Key(key))] }
func (d directDoor) command(b []byte, key string) []byte {
	return appendCommand(b, append([]string{"EVALSHA", d.sha, "1", cluster.Key(key)}, d.args...)...)
}

func dialAll(addrs []string) ([]net.Conn, error) {
	var out []net.Conn
	for _, a := range addrs {
		c, err := net.DialTimeout("tcp", a, 5*time.Second)
		if err != nil {
			for _, o := range out {
				_ = o.Close()
			}
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// appendCommand appends args as a RESP array of bulk strings.
func appendCommand(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// keySource draws the keys of one workload: key n of prefix is
// prefix+strconv.Itoa(n), n uniform or Zipf over the keyspace.
type keySource struct {
	prefix   string
	keyspace int
	zipfS    float64 // 0: uniform
	seed     uint64
}

// stream is caller w's sequence of key numbers: the same for the same
// seed and w, whichever side draws it.
func (k keySource) stream(w int) func() int {
	rng := rand.New(rand.NewPCG(k.seed, uint64(w)))
	if k.zipfS > 1 {
		z := rand.NewZipf(rng, k.zipfS, 1, uint64(k.keyspace-1))
		return func() int { return int(z.Uint64()) }
	}
	return func() int { return rng.IntN(k.keyspace) }
}

// genResult is what the replies of one run said.
type genResult struct {
	sent, admitted, refused int64
	by                      map[string]int64 // decided_by of RL.TAKE replies
	lat                     []time.Duration  // round trip of each batch
	elapsed                 time.Duration
}

// generate sends requests requests from callers callers, depth in flight
// each, through d, with the keys of keys, and counts every reply. An
// error reply or a broken connection fails the run.
func generate(ctx context.Context, d door, keys keySource, callers, depth, requests int, timeout time.Duration) (genResult, error) {
	conns := make([][]net.Conn, callers)
	defer func() {
		for _, cs := range conns {
			for _, c := range cs {
				_ = c.Close()
			}
		}
	}()
	for i := range conns {
		var err error
		if conns[i], err = d.dial(); err != nil {
			return genResult{}, err
		}
	}
	deadline := time.Now().Add(timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	parts := make([]genResult, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range callers {
		n := requests / callers
		if w < requests%callers {
			n++
		}
		wg.Go(func() { parts[w], errs[w] = call(d, conns[w], keys, w, depth, n, deadline) })
	}
	wg.Wait()
	out := genResult{by: map[string]int64{}, elapsed: time.Since(start)}
	for _, p := range parts {
		out.sent += p.sent
		out.admitted += p.admitted
		out.refused += p.refused
		out.lat = append(out.lat, p.lat...)
		for k, v := range p.by {
			out.by[k] += v
		}
	}
	return out, errors.Join(errs...)
}

// call is one caller of generate: n requests in batches of depth.
func call(d door, conns []net.Conn, keys keySource, w, depth, n int, deadline time.Time) (genResult, error) {
	res := genResult{by: map[string]int64{}}
	rd := make([]*bufio.Reader, len(conns))
	for i, c := range conns {
		if err := c.SetDeadline(deadline); err != nil {
			return res, err
		}
		rd[i] = bufio.NewReader(c)
	}
	bufs := make([][]byte, len(conns))
	order := make([]int, 0, depth) // the connection of each request of the batch
	next := keys.stream(w)
	for done := 0; done < n; {
		batch := min(depth, n-done)
		order = order[:0]
		for i := range bufs {
			bufs[i] = bufs[i][:0]
		}
		for range batch {
			key := keys.prefix + strconv.Itoa(next())
			i := d.conn(key)
			bufs[i] = d.command(bufs[i], key)
			order = append(order, i)
		}
		t := time.Now()
		for i, b := range bufs {
			if len(b) == 0 {
				continue
			}
			if _, err := conns[i].Write(b); err != nil {
				return res, err
			}
		}
		// Each connection answers in order, so the replies of a
		// connection come in the order its requests were written.
		for _, i := range order {
			v, err := readReply(rd[i])
			if err != nil {
				return res, err
			}
			if err := res.count(v); err != nil {
				return res, err
			}
		}
		res.lat = append(res.lat, time.Since(t))
		done += batch
	}
	return res, nil
}

// count tallies one decision: an array whose first element is allowed (1
// or 0) and, for RL.TAKE, whose sixth is decided_by.
func (r *genResult) count(v any) error {
	a, ok := v.([]any)
	if !ok || len(a) < 5 {
		return fmt.Errorf("bench: reply %v is not a decision", v)
	}
	switch a[0] {
	case int64(1):
		r.admitted++
	case int64(0):
		r.refused++
	default:
		return fmt.Errorf("bench: reply %v: allowed is not 0 or 1", v)
	}
	r.sent++
	if len(a) == 6 {
		if s, ok := a[5].(string); ok {
			r.by[s]++
		}
	}
	return nil
}

// respError is an error reply.
type respError string

func (e respError) Error() string { return "bench: error reply: " + string(e) }

// readReply reads one RESP2 value: an integer (int64), a simple or bulk
// string (string; a nil bulk string is nil), an array ([]any) or an
// error reply (returned as the error).
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("bench: malformed reply line %q", line)
	}
	body := string(line[1 : len(line)-2])
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, respError(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		return string(b[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("bench: unknown reply type %q", line)
}
