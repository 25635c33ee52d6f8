package layercheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"pgregory.net/rapid"
)

// slotLimit is the limit of the cc policy (cfg): slots held at once.
const slotLimit = 3

// slot is one slot an iteration's RL.ACQUIRE (either door) was granted.
type slot struct {
	key, token, user string
	hold             Hold
	released         bool
}

// acquire is the "acquire" action: RL.ACQUIRE on a cc key through RESP or
// HTTP, with the policy's TTL or one of its own.
func (it *iteration) acquire(t *rapid.T, ctx context.Context) {
	_, p := it.w.pick(t)
	key := it.base("cc", rapid.SampledFrom([]string{"a", "b"}).Draw(t, "cc.id"))
	door := rapid.SampledFrom([]string{"resp", "http"}).Draw(t, "cc.door")
	ttl := rapid.SampledFrom([]int64{0, 150, 600}).Draw(t, "cc.ttl")
	sent := time.Now()
	r, tok, err := p.acquire(ctx, door, key, ttl)
	recv := time.Now()
	if err != nil {
		it.opError(t, p, sent, recv, err, "RL.ACQUIRE %q (%s)", key, door)
		return
	}
	if r.Limit != slotLimit || r.Remaining < 0 || r.Remaining > slotLimit || (r.Allowed == 1) != (len(tok) == 32) || (r.Allowed == 1) != (r.RetryAfter == -1) {
		t.Fatalf("RL.ACQUIRE %q on %s (%s): reply %v token %q", key, p.name, door, r, tok)
	}
	it.w.count("acquire")
	it.logf(t, "%5d acquire %s %s %q ttl %d -> %v", it.ms(recv), p.name, door, key, ttl, r)
	it.mu.Lock()
	defer it.mu.Unlock()
	it.w.mu.Lock()
	it.w.stats.by[r.DecidedBy]++
	it.w.mu.Unlock()
	if r.Allowed == 1 {
		d := time.Second
		if ttl > 0 {
			d = time.Duration(ttl) * time.Millisecond
		}
		it.slots = append(it.slots, &slot{key: key, token: tok, user: p.role, hold: Hold{SentA: sent, RecvA: recv, TTL: d}})
	}
}

// release is the "release" action: RL.RELEASE of a granted slot, through
// either door, and now and then of its token under the other cc key,
// which must free nothing.
func (it *iteration) release(t *rapid.T, ctx context.Context) {
	it.mu.Lock()
	var open []*slot
	for _, s := range it.slots {
		if !s.released {
			open = append(open, s)
		}
	}
	it.mu.Unlock()
	if len(open) == 0 {
		return
	}
	s := open[rapid.IntRange(0, len(open)-1).Draw(t, "release.slot")]
	_, p := it.w.pick(t)
	door := rapid.SampledFrom([]string{"resp", "http"}).Draw(t, "release.door")
	if rapid.IntRange(0, 4).Draw(t, "release.cross") == 0 {
		other := strings.TrimSuffix(s.key, ".a") + ".b"
		if other == s.key {
			other = strings.TrimSuffix(s.key, ".b") + ".a"
		}
		sent := time.Now()
		if held, err := p.release(ctx, door, other, s.token); err != nil && !unavailable(err) && !it.w.unknownOutcome(p, sent, time.Now(), err) || held {
			t.Fatalf("RL.RELEASE of %q's token under %q: %v %v, want 0", s.key, other, held, err)
		}
	}
	sent := time.Now()
	held, err := p.release(ctx, door, s.key, s.token)
	recv := time.Now()
	if err != nil && (unavailable(err) || it.w.unknownOutcome(p, sent, recv, err)) {
		// the store did not answer in time (a loaded machine), or p was
		// being killed: the slot
		// may or may not be free, so it counts as held no longer than
		// until the release was sent, which never makes a false violation
		it.mu.Lock()
		s.released, s.hold.SentR = true, sent
		it.mu.Unlock()
		it.w.count("release")
		it.logf(t, "%5d release %s %s %q -> %v", it.ms(recv), p.name, door, s.key, err)
		return
	}
	if err != nil {
		it.opError(t, p, sent, recv, err, "RL.RELEASE %q (%s)", s.key, door)
		return
	}
	if !held && recv.Before(s.hold.SentA.Add(s.hold.TTL)) && it.w.nem != nil &&
		it.w.nem.during([]string{FaultKill, FaultRestartEmpty}, "", s.hold.SentA, recv) {
		held = true // the slot's state was lost with its node (a documented loss): not a false release
		it.w.nem.mu.Lock()
		it.w.nem.tolerated["RL.RELEASE lost slot"]++
		it.w.nem.mu.Unlock()
	}
	if !held && recv.Before(s.hold.SentA.Add(s.hold.TTL)) {
		t.Fatalf("RL.RELEASE %q answered 0 before the slot's TTL could pass", s.key)
	}
	it.w.count("release")
	it.logf(t, "%5d release %s %s %q -> %v", it.ms(recv), p.name, door, s.key, held)
	it.mu.Lock()
	s.released, s.hold.SentR = true, sent
	it.mu.Unlock()
}

// checkSlots checks "slots held ≤ limit at every moment" on every cc key
// of the iteration, it.mu held, and returns the violations' categories.
func (it *iteration) checkSlots(t *rapid.T) []string {
	by := map[string][]Hold{}
	for _, s := range it.slots {
		by[s.key] = append(by[s.key], s.hold)
	}
	var cats []string
	for key, hs := range by {
		most, at := CheckSlots(hs)
		it.w.mu.Lock()
		it.w.stats.slotsMost = max(it.w.stats.slotsMost, most)
		it.w.mu.Unlock()
		if most <= slotLimit {
			continue
		}
		// A kill or a restart-empty of the key's node may have made the
		// store forget slots it granted (the bound of a kill's lost
		// spends, in slots): those may be held on top of the limit, and
		// the rest must keep to it.
		if kept, kind := it.w.slotsKept(key, hs); kind != "" {
			if m, _ := CheckSlots(kept); m <= slotLimit {
				it.w.mu.Lock()
				if it.w.stats.slotsLost == nil {
					it.w.stats.slotsLost = map[string]int{}
				}
				it.w.stats.slotsLost[kind] = max(it.w.stats.slotsLost[kind], most-slotLimit)
				it.w.mu.Unlock()
				t.Logf("key %q: %d slots held at +%dms, limit %d, within the %d the store may have forgotten (%s)", key, most, it.ms(at), slotLimit, len(hs)-len(kept), kind)
				continue
			}
		}
		cat := "RL.ACQUIRE policy cc slots held > limit"
		detail := fmt.Sprintf("key %q: %d slots certainly held at +%dms (%s), limit %d; holds (ms since the iteration's start: acquire sent-answered, TTL, release sent): %s",
			key, most, it.ms(at), at.Format("15:04:05.000"), slotLimit, it.holds(hs))
		if it.w.nem != nil {
			detail += " " + it.w.nem.faultsAt(at.Add(-5*time.Second), at) + fmt.Sprintf("; the key's slots %v", it.w.slotsOf(key, false))
		}
		it.w.mu.Lock()
		if it.w.stats.categories[cat] == 0 {
			it.w.stats.examples[cat] = detail
		}
		it.w.stats.categories[cat]++
		it.w.stats.violations = append(it.w.stats.violations, detail)
		it.w.mu.Unlock()
		t.Logf("VIOLATION %s", detail)
		cats = append(cats, cat)
	}
	return cats
}

// acquire sends RL.ACQUIRE key [ttl] by door and returns the six fields
// and the token.
func (p *tenant) acquire(ctx context.Context, door, key string, ttl int64) (reply, string, error) {
	if door == "http" {
		return p.httpAcquire(ctx, key, ttl)
	}
	args := []any{"RL.ACQUIRE", key}
	if ttl > 0 {
		args = append(args, ttl)
	}
	return parseSeven(p.rc.Do(ctx, args...).Slice())
}

// parseSeven parses a reply of seven elements, RL.TAKE's six fields and a
// bulk string (RL.ACQUIRE's token, RL.TAKE … RECEIPT's receipt).
func parseSeven(v []any, err error) (reply, string, error) {
	if err != nil {
		return reply{}, "", err
	}
	if len(v) != 7 {
		return reply{}, "", fmt.Errorf("reply %v is not a 7-element array", v)
	}
	s, ok := v[6].(string)
	if !ok {
		return reply{}, "", fmt.Errorf("reply %v: element 7 is %T, want bulk string", v, v[6])
	}
	r, err := parseReply(v[:6])
	return r, s, err
}

func (p *tenant) httpAcquire(ctx context.Context, key string, ttl int64) (reply, string, error) {
	body := map[string]any{"key": key}
	if ttl > 0 {
		body["ttl_ms"] = ttl
	}
	var j struct {
		Allowed          bool
		Limit, Remaining int64
		Retry            int64  `json:"retry_after_ms"`
		Reset            int64  `json:"reset_after_ms"`
		DecidedBy        string `json:"decided_by"`
		Token            *string
	}
	if err := p.post(ctx, "/v1/acquire", body, &j); err != nil {
		return reply{}, "", err
	}
	if j.Token == nil {
		return reply{}, "", fmt.Errorf("/v1/acquire: no token field")
	}
	r := reply{Limit: j.Limit, Remaining: j.Remaining, RetryAfter: j.Retry, ResetAfter: j.Reset, DecidedBy: j.DecidedBy}
	if j.Allowed {
		r.Allowed = 1
	}
	return r, *j.Token, nil
}

// release sends RL.RELEASE key token by door.
func (p *tenant) release(ctx context.Context, door, key, token string) (bool, error) {
	if door == "http" {
		var j struct{ Held *bool }
		if err := p.post(ctx, "/v1/release", map[string]any{"key": key, "token": token}, &j); err != nil {
			return false, err
		}
		if j.Held == nil {
			return false, fmt.Errorf("/v1/release: no held field")
		}
		return *j.Held, nil
	}
	n, err := p.rc.Do(ctx, "RL.RELEASE", key, token).Int64()
	return n == 1, err
}

// post sends body as JSON to the HTTP door's path and decodes a 200's
// answer into v.
func (p *tenant) post(ctx context.Context, path string, body, v any) error {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.httpAddr+path, strings.NewReader(string(b)))
	if err != nil {
		return err
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return &httpError{resp.StatusCode, path + ": " + string(out)}
	}
	return json.Unmarshal(out, v)
}

// acquireBurst is the "acquire-burst" action: 8 RL.ACQUIREs of one cc key
// at once, spread over both instances and both doors, so that the limit
// is contended.
func (it *iteration) acquireBurst(t *rapid.T, ctx context.Context) {
	key := it.base("cc", rapid.SampledFrom([]string{"a", "b"}).Draw(t, "ccburst.id"))
	ttl := rapid.SampledFrom([]int64{0, 150, 600}).Draw(t, "ccburst.ttl")
	type got struct {
		r          reply
		tok        string
		sent, recv time.Time
		err        error
	}
	res := make([]got, 8)
	done := make(chan int)
	for i := range res {
		go func() {
			p := it.w.procs[i%len(it.w.procs)]
			g := &res[i]
			g.sent = time.Now()
			g.r, g.tok, g.err = p.acquire(ctx, []string{"resp", "http"}[i/2%2], key, ttl)
			g.recv = time.Now()
			done <- i
		}()
	}
	for range res {
		<-done
	}
	it.w.count("acquire-burst")
	d := time.Second
	if ttl > 0 {
		d = time.Duration(ttl) * time.Millisecond
	}
	granted := 0
	it.mu.Lock()
	for i, g := range res {
		if g.err != nil && it.w.unknownOutcome(it.w.procs[i%len(it.w.procs)], g.sent, g.recv, g.err) {
			continue // its process was being killed: booked nowhere
		}
		if g.err != nil {
			it.mu.Unlock()
			t.Fatalf("RL.ACQUIRE %q in a burst: %v", key, g.err)
		}
		if g.r.Allowed == 1 {
			granted++
			it.slots = append(it.slots, &slot{key: key, token: g.tok, user: "owner", hold: Hold{SentA: g.sent, RecvA: g.recv, TTL: d}})
		}
	}
	it.mu.Unlock()
	it.logf(t, "%5d acquire-burst %q ttl %d: %d of 8 granted", it.ms(time.Now()), key, ttl, granted)
}

// unavailable reports whether err says the store did not answer in time
// (unavailable or overloaded: RESP's error, HTTP's 503), as a loaded
// machine makes happen: what the command did is unknown.
func unavailable(err error) bool {
	var he *httpError
	if errors.As(err, &he) && he.status == http.StatusServiceUnavailable {
		return true
	}
	return err != nil && (strings.Contains(err.Error(), "store unavailable") || strings.Contains(err.Error(), "store overloaded"))
}

// holds prints a key's holds, for a violation's detail.
func (it *iteration) holds(hs []Hold) string {
	var b strings.Builder
	for _, h := range hs {
		r := "-"
		if !h.SentR.IsZero() {
			r = strconv.FormatInt(it.ms(h.SentR), 10)
		}
		fmt.Fprintf(&b, "%d-%d %v %s; ", it.ms(h.SentA), it.ms(h.RecvA), h.TTL, r)
	}
	return b.String()
}

// slotsKept are the holds of key the store cannot have forgotten, and the
// kind of fault that may have made it forget the others ("" when none
// did): a kill of the key's node forgets what its replica had not
// received, the grants in flight from HeldBack − λ (From − λ when not held
// back) to From + λ; a restart-empty every grant sent before it was
// healed.
func (w *world) slotsKept(key string, hs []Hold) ([]Hold, string) {
	slot := w.slotsOf(key, false)
	var kept []Hold
	kind := ""
next:
	for _, h := range hs {
		for _, f := range w.faults() {
			if f.Kind != FaultKill && f.Kind != FaultRestartEmpty || !inSlots(slot, f.Slots) {
				continue
			}
			from, to := f.From.Add(-ReplicationLag), f.From.Add(ReplicationLag)
			if !f.HeldBack.IsZero() {
				from = f.HeldBack.Add(-ReplicationLag)
			}
			if f.Kind == FaultRestartEmpty {
				from, to = time.Time{}, f.To
				if to.IsZero() {
					to = farFuture
				}
			}
			if !h.RecvA.Before(from) && !h.SentA.After(to) {
				kind = f.Kind
				continue next
			}
		}
		kept = append(kept, h)
	}
	return kept, kind
}

// inSlots reports whether a key of slots (nil: unknown) may live in the
// ranges rs (nil: every slot).
func inSlots(slots []int, rs [][2]int) bool {
	if slots == nil || rs == nil {
		return true
	}
	for _, s := range slots {
		for _, r := range rs {
			if s >= r[0] && s <= r[1] {
				return true
			}
		}
	}
	return false
}
