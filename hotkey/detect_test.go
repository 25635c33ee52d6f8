package hotkey

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

func hotPolicy(mode limit.HotMode, threshold int64) *limit.Policy {
	return &limit.Policy{Name: "api", Limit: 100, Rate: 1000, Period: time.Second,
		Hot: limit.Hot{Mode: mode, Threshold: threshold, Split: 8}}
}

// feed observes key at rate requests/s from `from` for d, and returns what
// Observe answered each time, with the times.
func feed(h *Layer, key string, p *limit.Policy, from time.Time, rate int, d time.Duration) (hot []bool, at []time.Time) {
	step := time.Second / time.Duration(rate)
	for t := from; t.Before(from.Add(d)); t = t.Add(step) {
		hot = append(hot, h.Observe(key, p, t))
		at = append(at, t)
	}
	return hot, at
}

func TestObserveThreshold(t *testing.T) {
	t.Parallel()
	c := newClock()
	h := newLayer(t, newStore(c), c, Config{})
	p := hotPolicy(limit.HotLease, 100)
	// 100 requests in the first second, 10ms apart: the 100th reaches the
	// threshold.
	hot, _ := feed(h, "acme", p, t0, 100, time.Second)
	for j, got := range hot {
		if want := j == 99; got != want {
			t.Fatalf("request %d: hot = %v, want %v", j+1, got, want)
		}
	}
	if h.Observe("other", p, t0.Add(time.Second)) {
		t.Fatal("a key seen once is hot")
	}
}

func TestObserveHysteresis(t *testing.T) {
	t.Parallel()
	c := newClock()
	h := newLayer(t, newStore(c), c, Config{})
	p := hotPolicy(limit.HotSplit, 100)
	feed(h, "acme", p, t0, 200, time.Second)
	// 60/s is above threshold/2: the key stays hot.
	hot, _ := feed(h, "acme", p, t0.Add(time.Second), 60, 3*time.Second)
	for j, got := range hot {
		if !got {
			t.Fatalf("at 60/s, request %d: not hot", j)
		}
	}
	// At 20/s the rate falls below 50; the key cools a second after that.
	from := t0.Add(4 * time.Second)
	var below, cooled time.Time
	for tm := from; tm.Before(from.Add(3 * time.Second)); tm = tm.Add(50 * time.Millisecond) {
		got := h.Observe("acme", p, tm)
		if below.IsZero() && h.rate("acme", tm.UnixNano()) < 50 {
			below = tm
		}
		if !got && cooled.IsZero() {
			cooled = tm
		}
		if got && !cooled.IsZero() {
			t.Fatalf("hot again at %v after cooling at %v", tm.Sub(t0), cooled.Sub(t0))
		}
	}
	if below.IsZero() || cooled.IsZero() {
		t.Fatalf("below = %v, cooled = %v: want both set", below, cooled)
	}
	if d := cooled.Sub(below); d < time.Second || d > time.Second+50*time.Millisecond {
		t.Fatalf("cooled %v after the rate fell below threshold/2, want 1s", d)
	}
	// 70/s is between threshold/2 and threshold: a cool key stays cool.
	hot, _ = feed(h, "acme", p, t0.Add(7*time.Second), 70, 2*time.Second)
	for j, got := range hot {
		if got {
			t.Fatalf("at 70/s after cooling, request %d: hot", j)
		}
	}
	hot, _ = feed(h, "acme", p, t0.Add(9*time.Second), 150, time.Second)
	if !hot[len(hot)-1] {
		t.Fatal("at 150/s: not hot again")
	}
}

func TestObserveModes(t *testing.T) {
	t.Parallel()
	c := newClock()
	h := newLayer(t, newStore(c), c, Config{})
	for _, p := range []*limit.Policy{nil, hotPolicy(limit.HotOff, 1), hotPolicy("", 1), hotPolicy(limit.HotLease, 0)} {
		for range 10 {
			if h.Observe("k", p, t0) {
				t.Fatalf("policy %+v: hot", p)
			}
		}
	}
}

func TestHotKeysList(t *testing.T) {
	t.Parallel()
	c := newClock()
	h := newLayer(t, newStore(c), c, Config{})
	p := hotPolicy(limit.HotLease, 100)
	_, at := feed(h, "acme", p, t0, 1000, 300*time.Millisecond)
	feed(h, "quiet", p, t0, 10, 300*time.Millisecond)
	c.Add(300 * time.Millisecond)
	got := h.HotKeys()
	if len(got) != 1 {
		t.Fatalf("HotKeys = %+v, want one key", got)
	}
	k := got[0]
	if k.Key != "acme" || k.Policy != "api" || k.Mode != limit.HotLease || !k.Since.Equal(at[99]) {
		t.Fatalf("HotKeys[0] = %+v, want acme, api, lease, since %v", k, at[99])
	}
	if k.Rate < 299 || k.Rate > 301 {
		t.Fatalf("rate = %v, want 300 (300 requests in the last second)", k.Rate)
	}
	if s := h.Stats(); s.HotKeys != 1 {
		t.Fatalf("Stats().HotKeys = %d, want 1", s.HotKeys)
	}
	// Without requests the key cools: listed no more.
	c.Add(2 * time.Second)
	if got := h.HotKeys(); len(got) != 0 {
		t.Fatalf("HotKeys after 2s idle = %+v, want none", got)
	}
	if s := h.Stats(); s.HotKeys != 0 {
		t.Fatalf("Stats().HotKeys = %d, want 0", s.HotKeys)
	}
}

func TestMaxHot(t *testing.T) {
	t.Parallel()
	c := newClock()
	h := newLayer(t, newStore(c), c, Config{MaxHot: 100})
	p := hotPolicy(limit.HotLease, 1)
	n := 0
	for i := range 10_000 {
		if h.Observe("k"+strconv.Itoa(i), p, t0) {
			n++
		}
	}
	if n != 100 || h.nhot.Load() != 100 {
		t.Fatalf("%d keys reported hot, %d held; want 100, the bound", n, h.nhot.Load())
	}
	// Once those cool, others may turn hot.
	if !h.Observe("late", p, t0.Add(3*time.Second)) {
		t.Fatal("a hot key was refused after the others cooled")
	}
}

// TestMemory10MKeys feeds 10,000,000 distinct keys, each hot at its first
// request (threshold 1, the worst case for the hot map), and checks that the
// detection state stays within 64 MiB.
func TestMemory10MKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("10M keys")
	}
	n := 10_000_000
	if raceEnabled {
		n = 1_000_000 // the race detector makes each Observe ~20× slower
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	c := newClock()
	h := newLayer(t, newStore(c), c, Config{})
	p := hotPolicy(limit.HotLease, 1)
	start := time.Now()
	buf := []byte("tenant:")
	ns := t0.UnixNano()
	hot := 0
	for i := range n {
		buf = strconv.AppendInt(buf[:7], int64(i), 10)
		if h.Observe(string(buf), p, time.Unix(0, ns+int64(i)*1000)) {
			hot++
		}
	}
	elapsed := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d distinct keys in %v (%v/key): heap growth %.1f MiB, %d reported hot, %d held hot",
		n, elapsed.Round(time.Millisecond), elapsed/time.Duration(n), float64(growth)/(1<<20), hot, h.nhot.Load())
	if growth > 64<<20 {
		t.Fatalf("detection state grew by %d MiB with %d keys, want ≤ 64 MiB", growth>>20, n)
	}
	if h.nhot.Load() > h.maxHot {
		t.Fatalf("%d hot keys held, bound %d", h.nhot.Load(), h.maxHot)
	}
	runtime.KeepAlive(h)
}
