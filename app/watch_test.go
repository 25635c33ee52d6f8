package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

// fakeClock is the watch's after: every call is counted and returns the
// one channel the test fires by a send, which returns once the loop has
// taken it.
type fakeClock struct {
	mu    sync.Mutex
	calls []time.Duration
	fire  chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{fire: make(chan time.Time)} }

func (c *fakeClock) after(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, d)
	return c.fire
}

func (c *fakeClock) armed() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.calls...)
}

// loop is a watch's run loop fed by the test: events and errors go in
// unbuffered, so a send returns once the loop has taken it, and the next
// send once the loop has finished with it (checks and reloads included).
type loop struct {
	t       *testing.T
	w       *watch
	clock   *fakeClock
	events  chan fsnotify.Event
	errs    chan error
	reloads atomic.Int64
	reads   atomic.Int64 // digests taken: each check reads the file once
	logs    *syncBuffer
}

func startLoop(t *testing.T, path string) *loop {
	t.Helper()
	l := &loop{t: t, clock: newFakeClock(), events: make(chan fsnotify.Event), errs: make(chan error), logs: &syncBuffer{}}
	target := fileTarget("config", path, func() { l.reloads.Add(1) })
	digest := target.digest
	target.digest = func() (string, error) { l.reads.Add(1); return digest() }
	log := slog.New(slog.NewTextHandler(l.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l.w = newWatch(&sync.Mutex{}, []*watchTarget{target}, 7*time.Millisecond, l.clock.after, log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.w.run(ctx, l.events, l.errs) }()
	t.Cleanup(func() { cancel(); <-done })
	l.sync() // the check every target gets at the start has run
	return l
}

// send gives the loop one event on name (a path) and waits until it has
// handled it.
func (l *loop) send(op fsnotify.Op, name string) {
	l.events <- fsnotify.Event{Name: name, Op: op}
	l.sync()
}

// sync returns once the loop has finished with what it took before: it
// takes the next send only then. A chmod of nothing watched changes
// nothing.
func (l *loop) sync() {
	l.events <- fsnotify.Event{Name: "/nonexistent/sync", Op: fsnotify.Chmod}
}

// quietPassed fires the quiet interval and waits until the checks it
// starts are done.
func (l *loop) quietPassed() {
	select {
	case l.clock.fire <- time.Now():
	case <-time.After(10 * time.Second):
		l.t.Fatal("no quiet interval armed: the loop is not waiting to read")
	}
	l.sync()
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestWatchLoop: which events make the watch read its file, that it reads
// only once the quiet interval has passed since the last of them, and
// that it reloads only when the content read differs from the last read.
// Events are fed by the test (what fsnotify reports for each change is
// TestWatchFsnotify's), the clock is the test's.
func TestWatchLoop(t *testing.T) {
	t.Parallel()
	type step struct {
		change    func(t *testing.T, path string) // on disk, before the events
		events    []fsnotify.Event                // names relative to the file's directory
		wantArmed int                             // quiet intervals (re)started by the events
		wantReads int                             // digests taken once it passed
		reloads   int                             // reloads, counted from the start
	}
	same := func(t *testing.T, path string) { writeFile(t, path, "one") }
	other := func(t *testing.T, path string) { writeFile(t, path, "two") }
	ev := func(op fsnotify.Op, name string) fsnotify.Event { return fsnotify.Event{Name: name, Op: op} }
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a write of new bytes", []step{{change: other, events: []fsnotify.Event{ev(fsnotify.Write, "sluice.yaml")}, wantArmed: 1, wantReads: 1, reloads: 1}}},
		{"a write of the same bytes", []step{{change: same, events: []fsnotify.Event{ev(fsnotify.Write, "sluice.yaml")}, wantArmed: 1, wantReads: 1, reloads: 0}}},
		{"a touch or chmod", []step{{change: same, events: []fsnotify.Event{ev(fsnotify.Chmod, "sluice.yaml")}, wantArmed: 0, wantReads: 0, reloads: 0}}},
		{"another file", []step{{change: other, events: []fsnotify.Event{ev(fsnotify.Write, "other.yaml"), ev(fsnotify.Create, "..data_tmp")}, wantArmed: 0, wantReads: 0, reloads: 0}}},
		{"the same name in a subdirectory", []step{{change: other, events: []fsnotify.Event{ev(fsnotify.Write, "sub/sluice.yaml")}, wantArmed: 0, wantReads: 0, reloads: 0}}},
		{"the kubelet's ..data swap", []step{{change: other, events: []fsnotify.Event{
			ev(fsnotify.Create, "..2026_12_02_00_00_00.2"), ev(fsnotify.Create, "..data_tmp"), ev(fsnotify.Rename, "..data_tmp"),
			ev(fsnotify.Create, "..data"), ev(fsnotify.Remove, "..2026_12_02_00_00_00.1"),
		}, wantArmed: 1, wantReads: 1, reloads: 1}}},
		{"an editor's rename, a burst read once", []step{{change: other, events: []fsnotify.Event{
			ev(fsnotify.Create, "sluice.yaml.tmp"), ev(fsnotify.Write, "sluice.yaml.tmp"), ev(fsnotify.Rename, "sluice.yaml"),
			ev(fsnotify.Rename, "sluice.yaml.tmp"), ev(fsnotify.Create, "sluice.yaml"), ev(fsnotify.Write, "sluice.yaml"),
		}, wantArmed: 3, wantReads: 1, reloads: 1}}},
		{"an in-place write read between its truncate and its write", []step{
			{change: func(t *testing.T, path string) { writeFile(t, path, "") }, events: []fsnotify.Event{ev(fsnotify.Write, "sluice.yaml")}, wantArmed: 1, wantReads: 1, reloads: 0},
			{change: other, events: []fsnotify.Event{ev(fsnotify.Write, "sluice.yaml")}, wantArmed: 1, wantReads: 1, reloads: 1},
		}},
		{"removed, then back the same", []step{
			{change: func(t *testing.T, path string) { os.Remove(path) }, events: []fsnotify.Event{ev(fsnotify.Remove, "sluice.yaml")}, wantArmed: 1, wantReads: 1, reloads: 0},
			{change: same, events: []fsnotify.Event{ev(fsnotify.Create, "sluice.yaml")}, wantArmed: 1, wantReads: 1, reloads: 0},
		}},
		{"removed, then back changed", []step{
			{change: func(t *testing.T, path string) { os.Remove(path) }, events: []fsnotify.Event{ev(fsnotify.Remove, "sluice.yaml")}, wantArmed: 1, wantReads: 1, reloads: 0},
			{change: other, events: []fsnotify.Event{ev(fsnotify.Create, "sluice.yaml")}, wantArmed: 1, wantReads: 1, reloads: 1},
			{change: other, events: []fsnotify.Event{ev(fsnotify.Write, "sluice.yaml")}, wantArmed: 1, wantReads: 1, reloads: 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "sluice.yaml")
			writeFile(t, path, "one")
			l := startLoop(t, path)
			for i, s := range tc.steps {
				armed, reads := len(l.clock.armed()), l.reads.Load()
				s.change(t, path)
				for _, e := range s.events {
					l.send(e.Op, filepath.Join(dir, e.Name))
				}
				if got := l.reads.Load() - reads; got != 0 {
					t.Errorf("step %d: %d reads before the quiet interval passed, want 0", i, got)
				}
				if got := l.clock.armed()[armed:]; len(got) != s.wantArmed {
					t.Errorf("step %d: quiet interval (re)started %d times, want %d", i, len(got), s.wantArmed)
				} else {
					for _, d := range got {
						if d != 7*time.Millisecond {
							t.Errorf("step %d: quiet interval of %v, want the watch's 7ms", i, d)
						}
					}
				}
				if s.wantArmed > 0 {
					l.quietPassed()
				}
				if got := l.reads.Load() - reads; got != int64(s.wantReads) {
					t.Errorf("step %d: %d reads, want %d", i, got, s.wantReads)
				}
				if got := l.reloads.Load(); got != int64(s.reloads) {
					t.Errorf("step %d: %d reloads, want %d\n%s", i, got, s.reloads, l.logs)
				}
			}
		})
	}
}

// TestWatchGoneLogsOnce: a file that stays gone is logged once, not at
// every event; an event queue that overflowed reads the file again.
func TestWatchGoneLogsOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "sluice.yaml")
	writeFile(t, path, "one")
	l := startLoop(t, path)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		l.send(fsnotify.Remove, path)
		l.quietPassed()
	}
	if n := strings.Count(l.logs.String(), "watched file gone"); n != 1 {
		t.Errorf("%d \"watched file gone\" lines for one removal, want 1:\n%s", n, l.logs)
	}
	writeFile(t, path, "two")
	l.errs <- fmt.Errorf("read: %w", fsnotify.ErrEventOverflow)
	l.sync()
	l.quietPassed()
	if got := l.reloads.Load(); got != 1 {
		t.Errorf("after an overflow with the file back changed: %d reloads, want 1\n%s", got, l.logs)
	}
}

// TestWatchSeenBySIGHUP: what SIGHUP has read (seen) is not reloaded again
// by the watch; a change after it is.
func TestWatchSeenBySIGHUP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "sluice.yaml")
	writeFile(t, path, "one")
	l := startLoop(t, path)
	writeFile(t, path, "two")
	l.send(fsnotify.Write, path)
	l.w.mu.Lock()
	l.w.seen() // SIGHUP's Reload, before the quiet interval passed
	l.w.mu.Unlock()
	l.quietPassed()
	if got := l.reloads.Load(); got != 0 {
		t.Errorf("a change SIGHUP had read: %d reloads by the watch, want 0", got)
	}
	writeFile(t, path, "three")
	l.send(fsnotify.Write, path)
	l.quietPassed()
	if got := l.reloads.Load(); got != 1 {
		t.Errorf("a change after SIGHUP: %d reloads, want 1", got)
	}
}

// kubeVolume lays dir out as a mounted ConfigMap: files in a timestamped
// directory, ..data a symlink to it, each file a symlink through ..data.
// Each call swaps in a new payload as the kubelet does.
type kubeVolume struct {
	dir string
	gen int
}

func (v *kubeVolume) update(t *testing.T, files map[string]string) {
	t.Helper()
	v.gen++
	ts := fmt.Sprintf("..2026_12_02_00_00_00.%d", v.gen)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(filepath.Join(v.dir, ts), 0o755))
	for name, text := range files {
		must(os.WriteFile(filepath.Join(v.dir, ts, name), []byte(text), 0o644))
	}
	must(os.Symlink(ts, filepath.Join(v.dir, "..data_tmp")))
	must(os.Rename(filepath.Join(v.dir, "..data_tmp"), filepath.Join(v.dir, kubeData)))
	for name := range files {
		if _, err := os.Lstat(filepath.Join(v.dir, name)); errors.Is(err, os.ErrNotExist) {
			must(os.Symlink(filepath.Join(kubeData, name), filepath.Join(v.dir, name)))
		}
	}
	if v.gen > 1 {
		must(os.RemoveAll(filepath.Join(v.dir, fmt.Sprintf("..2026_12_02_00_00_00.%d", v.gen-1))))
	}
}

// TestWatchFsnotify: the watch on a real directory, with what inotify
// reports, a 1ms quiet interval and the real clock. Each change of the
// sequence, of a file and of an Envoy directory, gives one reload of the
// target it changes and none of the other; the last step rewrites the
// same bytes and waits until the watch has read them, so the counts are
// final (every earlier event was handled before it).
func TestWatchFsnotify(t *testing.T) {
	t.Parallel()
	cm := &kubeVolume{dir: t.TempDir()}
	cm.update(t, map[string]string{"sluice.yaml": "a: 1\n"})
	envoy := &kubeVolume{dir: t.TempDir()}
	envoy.update(t, map[string]string{"edge.yaml": "domain: edge\n", "notes.txt": "x"})
	plain := filepath.Join(t.TempDir(), "users.acl")
	writeFile(t, plain, "user a on nopass\n")

	var mu sync.Mutex
	reloads := map[string]int{}
	reads := map[string]int{}
	count := func(flag string) func() {
		return func() { reloads[flag]++ } // under the watch's mutex, as mu
	}
	targets := []*watchTarget{
		fileTarget("config", filepath.Join(cm.dir, "sluice.yaml"), count("config")),
		dirTarget("envoy-config", envoy.dir, count("envoy-config")),
		fileTarget("aclfile", plain, count("aclfile")),
	}
	for _, tg := range targets {
		digest, flag := tg.digest, tg.flag
		tg.digest = func() (string, error) { reads[flag]++; return digest() } // under mu too
	}
	w := newWatch(&mu, targets, time.Millisecond, time.After, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done, err := w.start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-done })
	snapshot := func() (map[string]int, map[string]int) {
		mu.Lock()
		defer mu.Unlock()
		r, d := map[string]int{}, map[string]int{}
		for k, v := range reloads {
			r[k] = v
		}
		for k, v := range reads {
			d[k] = v
		}
		return r, d
	}
	// waitFor polls until ok holds of the counts, for 10s at most.
	waitFor := func(what string, ok func(reloads, reads map[string]int) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			r, d := snapshot()
			if ok(r, d) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not seen within 10s: reloads %v, reads %v", what, r, d)
			}
			time.Sleep(2 * time.Millisecond) // pacing the poll, not synchronising
		}
	}
	want := map[string]int{}
	steps := []struct {
		name, target string
		change       func()
	}{
		{"the kubelet swaps the ConfigMap", "config", func() { cm.update(t, map[string]string{"sluice.yaml": "a: 2\n"}) }},
		{"the kubelet swaps the Envoy volume", "envoy-config", func() {
			envoy.update(t, map[string]string{"edge.yaml": "domain: edge2\n", "notes.txt": "x"})
		}},
		{"an editor saves the aclfile by rename", "aclfile", func() {
			writeFile(t, plain+".swp", "user b on nopass\n")
			if err := os.Rename(plain+".swp", plain); err != nil {
				t.Fatal(err)
			}
		}},
		{"an in-place write of the aclfile", "aclfile", func() { writeFile(t, plain, "user c on nopass\n") }},
		{"a non-YAML file of the Envoy volume changes", "", func() {
			envoy.update(t, map[string]string{"edge.yaml": "domain: edge2\n", "notes.txt": "y"})
		}},
		{"a new YAML file in the Envoy directory", "envoy-config", func() { writeFile(t, filepath.Join(envoy.dir, "more.yml"), "domain: more\n") }},
		{"the aclfile removed", "", func() { os.Remove(plain) }},
		{"the aclfile back, changed", "aclfile", func() { writeFile(t, plain, "user d on nopass\n") }},
	}
	for _, s := range steps {
		_, before := snapshot()
		s.change()
		if s.target != "" {
			want[s.target]++
			waitFor(s.name, func(r, _ map[string]int) bool { return r[s.target] >= want[s.target] })
		} else {
			// Nothing to reload: wait until every target it touched was read.
			waitFor(s.name, func(_, d map[string]int) bool {
				return d["envoy-config"] > before["envoy-config"] || d["aclfile"] > before["aclfile"]
			})
		}
	}
	_, before := snapshot()
	writeFile(t, plain, "user d on nopass\n") // the same bytes
	waitFor("the last rewrite read", func(_, d map[string]int) bool { return d["aclfile"] > before["aclfile"] })
	got, _ := snapshot()
	for _, flag := range []string{"config", "envoy-config", "aclfile"} {
		if got[flag] != want[flag] {
			t.Errorf("--%s: %d reloads, want %d (one per change)", flag, got[flag], want[flag])
		}
	}
}

// TestNewWatchTargets: which files are watched: those given, none with
// --watch-config=false or without files.
func TestNewWatchTargets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  func(*Config)
		want []string
	}{
		{"no files: the built-in policy", func(c *Config) {}, nil},
		{"--config", func(c *Config) { c.PolicyFile = "/etc/sluice/sluice.yaml" }, []string{"config /etc/sluice/sluice.yaml in /etc/sluice"}},
		{"all three", func(c *Config) {
			c.PolicyFile, c.ACLFile, c.EnvoyConfig = "conf/sluice.yaml", "/etc/sluice-users/users.acl", "/etc/envoy"
		}, []string{"config conf/sluice.yaml in conf", "aclfile /etc/sluice-users/users.acl in /etc/sluice-users", "envoy-config /etc/envoy in /etc/envoy"}},
		{"--watch-config=false", func(c *Config) { c.PolicyFile, c.WatchConfig = "/etc/sluice/sluice.yaml", false }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Defaults()
			tc.cfg(&cfg)
			a := &App{cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			w := a.newWatch()
			var got []string
			if w != nil {
				for _, tg := range w.targets {
					got = append(got, fmt.Sprintf("%s %s in %s", tg.flag, tg.path, tg.dir))
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("watched %q, want %q", got, tc.want)
			}
		})
	}
}

// TestAppWatchBesideSIGHUP: the app's own watch and Reload (SIGHUP) at
// once, in process so that -race sees both (without the watch's lock in
// check, -race reports the digests read and written by both): every
// ConfigMap swap reaches the policies in force, whichever of the two reads
// it first. That the watch alone reloads is TestWatchFsnotify's and the
// binary's tests'.
func TestAppWatchBesideSIGHUP(t *testing.T) {
	t.Parallel()
	vol := &kubeVolume{dir: t.TempDir()}
	policyFile := func(n int) string {
		return fmt.Sprintf("policies:\n  - name: p\n    match: \"*\"\n    limit: %d\n    rate: 1\n    period: 1h\n    on_store_error: closed\n", n)
	}
	vol.update(t, map[string]string{"sluice.yaml": policyFile(1)})
	cfg := Defaults()
	cfg.Listen, cfg.Admin, cfg.PolicyFile = "127.0.0.1:0", "", filepath.Join(vol.dir, "sluice.yaml")
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := a.Start(ctx); err != nil {
		a.Close()
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	limitNow := func() int64 { return a.holder.Current().Policies[0].Limit }
	stop := make(chan struct{})
	sighups := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				sighups <- n
				return
			default:
				_ = a.Reload()
				n++
			}
		}
	}()
	for n := 2; n <= 6; n++ {
		vol.update(t, map[string]string{"sluice.yaml": policyFile(n)})
		deadline := time.Now().Add(10 * time.Second)
		for limitNow() != int64(n) {
			if time.Now().After(deadline) {
				t.Fatalf("limit %d 10s after the swap to %d", limitNow(), n)
			}
			time.Sleep(time.Millisecond) // pacing the poll, not synchronising
		}
	}
	close(stop)
	t.Logf("%d reloads by SIGHUP's function beside the watch", <-sighups)
}
