package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// nextMidnight is the first midnight after t in loc, counted here with
// the time package alone, not with sluice's calendar code.
func nextMidnight(t time.Time, loc *time.Location) time.Time {
	y, m, d := t.In(loc).Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, loc)
}

// ceilMs is d in ms, rounded up.
func ceilMs(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }

// checkMidnight fails unless ms is the time from a moment in [before,
// after] to the next midnight in loc, rounded up, as reset_after_ms is, or
// up to early less (a deny-cache refusal counts from the start of the
// store call it remembers, which may be that much earlier than the
// store's clock read).
func checkMidnight(t *testing.T, what string, ms int64, before, after time.Time, early time.Duration, loc *time.Location) {
	t.Helper()
	lo, hi := ceilMs(nextMidnight(after, loc).Sub(after)), ceilMs(nextMidnight(before, loc).Sub(before))
	if lo > hi { // midnight came between the two
		lo, hi = hi, lo
	}
	lo -= ceilMs(early)
	if ms < lo || ms > hi {
		t.Fatalf("%s %d ms, want the time to midnight in %s: %d..%d ms", what, ms, loc, lo, hi)
	}
}

// A daily quota in Kolkata, from YAML, on a real cluster: the quota holds,
// reset_after_ms and retry_after_ms run to Kolkata's next midnight, and
// the key's TTL ends a second after it.
func TestCalendarQuotaOnCluster(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{})
	cfg := writeConfig(t, `defaults: {on_store_error: closed}
policies:
  - name: daily
    match: "daily:*"
    calendar: day
    timezone: Asia/Kolkata
    limit: 3
  - name: api
    match: "*"
    limit: 100
    rate: 100
`)
	s := startSluice(t, "--config", cfg, "--cluster", strings.Join(c.Addrs(), ","))
	cl := s.client(t)
	ctx := context.Background()
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	admitted := 0
	var span time.Duration // of the last call the store decided
	for i := range 5 {
		before := time.Now()
		r, err := take(ctx, cl, "daily:alice", 1)
		after := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		// a refusal may come from the deny cache, which remembers the store's
		if r.Limit != 3 || r.DecidedBy != "store" && (r.Allowed || r.DecidedBy != "deny-cache") {
			t.Fatalf("take %d: %+v", i, r)
		}
		early := time.Duration(0)
		if r.DecidedBy == "deny-cache" {
			early = span
		} else {
			span = after.Sub(before)
		}
		checkMidnight(t, "reset_after_ms", r.ResetMs, before, after, early, kolkata)
		if r.Allowed {
			admitted++
			if r.Remaining != int64(3-admitted) || r.Retry != -1 {
				t.Fatalf("take %d: %+v", i, r)
			}
			continue
		}
		checkMidnight(t, "retry_after_ms", r.Retry, before, after, early, kolkata)
	}
	if admitted != 3 {
		t.Fatalf("admitted %d of a daily quota of 3", admitted)
	}
	before := time.Now()
	ttl, err := c.ClusterClient().PTTL(ctx, "sluice:{daily:alice}").Result()
	if err != nil {
		t.Fatal(err)
	}
	if end := nextMidnight(before, kolkata).Add(time.Second); ttl <= 0 || ttl > end.Sub(before)+time.Millisecond {
		t.Fatalf("the key's TTL %v, want a second past Kolkata's midnight, at most %v", ttl, end.Sub(before))
	}

	// RL.POLICY SET takes a calendar policy, GET shows it, RL.TAKE uses it.
	if err := cl.Do(ctx, "RL.POLICY", "SET", "weekly", `{"match": "weekly:*", "limit": 2, "calendar": "week", "timezone": "America/New_York", "on_store_error": "closed"}`).Err(); err != nil {
		t.Fatal(err)
	}
	js, err := cl.Do(ctx, "RL.POLICY", "GET", "weekly").Text()
	if err != nil || !strings.Contains(js, `"calendar":"week"`) || !strings.Contains(js, `"timezone":"America/New_York"`) {
		t.Fatalf("GET: %s %v", js, err)
	}
	ny, _ := time.LoadLocation("America/New_York")
	before = time.Now()
	r, err := take(ctx, cl, "weekly:bob", 2)
	after := time.Now()
	if err != nil || !r.Allowed || r.Limit != 2 {
		t.Fatalf("weekly take: %+v %v", r, err)
	}
	monday := func(t time.Time) time.Time { // the next Monday's midnight in New York
		m := nextMidnight(t, ny)
		for m.Weekday() != time.Monday {
			m = nextMidnight(m, ny)
		}
		return m
	}
	if lo, hi := ceilMs(monday(after).Sub(after)), ceilMs(monday(before).Sub(before)); r.ResetMs < min(lo, hi) || r.ResetMs > max(lo, hi) {
		t.Fatalf("weekly reset_after_ms %d, want %d..%d (to Monday in New York)", r.ResetMs, lo, hi)
	}
	if r, err := take(ctx, cl, "weekly:bob", 1); err != nil || r.Allowed {
		t.Fatalf("a third take of a weekly 2: %+v %v", r, err)
	}
}

// The embedded store counts calendar days as the cluster does, on Go's
// clock; an unknown zone keeps sluice from starting, naming the file,
// policy and field.
func TestCalendarQuotaEmbedded(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "defaults: {on_store_error: closed}\npolicies:\n  - {name: daily, match: \"*\", calendar: day, timezone: Europe/Berlin, limit: 2}\n")
	s := startSluice(t, "--config", cfg)
	cl := s.client(t)
	ctx := context.Background()
	berlin, _ := time.LoadLocation("Europe/Berlin")
	for i, want := range []bool{true, true, false} {
		before := time.Now()
		r, err := take(ctx, cl, "k", 1)
		after := time.Now()
		if err != nil || r.Allowed != want || r.DecidedBy != "embedded" {
			t.Fatalf("take %d: %+v %v", i, r, err)
		}
		checkMidnight(t, "reset_after_ms", r.ResetMs, before, after, 0, berlin)
	}

	bad := writeConfig(t, "defaults: {on_store_error: closed}\npolicies:\n  - name: daily\n    match: \"*\"\n    calendar: day\n    timezone: Europe/Atlantis\n    limit: 2\n")
	var stderr strings.Builder
	err := run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--admin", "", "--config", bad}, &strings.Builder{}, &stderr)
	if err == nil || !strings.Contains(err.Error(), `sluice.yaml:6: policy #1 "daily": timezone: unknown time zone "Europe/Atlantis"`) {
		t.Fatalf("an unknown zone: %v", err)
	}
}

// The calendar session of docs/configuration.md, typed into redis-cli
// against the binary on the page's calendar config: every line as the
// page's, except that a time is the time to the next midnight in the
// config's zone when the session starts (less at most the session's
// duration), where the page shows it at 15:00.
func TestCalendarDocSession(t *testing.T) {
	t.Parallel()
	cli := requireTool(t, "redis-cli")
	const page = "docs/configuration.md"
	raw, err := os.ReadFile(filepath.Join(repoRoot, page))
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	config := strings.Join(docBlock(t, text, "calendar-test: config"), "\n") + "\n"
	m := regexp.MustCompile(`timezone: (\S+)`).FindStringSubmatch(config)
	if m == nil {
		t.Fatal(page + ": the calendar config names no timezone")
	}
	loc, err := time.LoadLocation(m[1])
	if err != nil {
		t.Fatal(err)
	}
	args, cmds, want := parseSession(t, docBlock(t, text, "calendar-test: session"))
	s := startSluice(t, "--config", writeConfig(t, config))
	host, port := hostPort(t, s.Addr)
	cmd := exec.Command(cli, append(withPort(args, host, port), "--no-raw")...)
	cmd.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
	start := time.Now()
	out, err := cmd.Output()
	slack := ceilMs(time.Since(start)) + 1
	if err != nil {
		t.Fatalf("redis-cli: %v\n%s", err, out)
	}
	left := strconv.FormatInt(ceilMs(nextMidnight(start, loc).Sub(start)), 10)
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("redis-cli printed %d lines, %s has %d:\n%s", len(got), page, len(want), out)
	}
	for i, w := range want {
		if w.ms { // the page's time, as the session gets it now
			n := integerRE.FindStringSubmatch(w.text)
			w.text = strings.TrimSuffix(w.text, n[2]) + left
		}
		if !checkSessionLine(w, got[i], slack) {
			t.Errorf("after %q: %s has %q (a time within %d ms below), redis-cli printed %q", w.cmd, page, w.text, slack, got[i])
		}
	}
}
