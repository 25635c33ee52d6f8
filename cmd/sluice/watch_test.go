package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// configMap is a directory laid out as the kubelet lays out a mounted
// ConfigMap or Secret volume: the files in a timestamped directory,
// `..data` a symlink to it, and each file a symlink through `..data`:
//
//	..2026_12_02_00_00_00.1/sluice.yaml
//	..data -> ..2026_12_02_00_00_00.1
//	sluice.yaml -> ..data/sluice.yaml
type configMap struct {
	t   testing.TB
	dir string
	gen int    // how many payloads were written
	cur string // the timestamped directory ..data points at
}

// newConfigMap writes files as the first payload of a ConfigMap volume in
// a temp dir.
func newConfigMap(t testing.TB, files map[string]string) *configMap {
	t.Helper()
	m := &configMap{t: t, dir: t.TempDir()}
	m.update(files)
	return m
}

// path is the user-visible path of a file of the volume.
func (m *configMap) path(name string) string { return filepath.Join(m.dir, name) }

// update puts files in force as the kubelet's AtomicWriter does: the new
// payload in a new timestamped directory, a symlink ..data_tmp to it
// renamed over ..data (the one atomic step), the user-visible symlinks
// of new files, then the old directory removed.
func (m *configMap) update(files map[string]string) {
	m.t.Helper()
	m.gen++
	ts := fmt.Sprintf("..2026_12_02_00_00_00.%d", m.gen)
	if err := os.Mkdir(filepath.Join(m.dir, ts), 0o755); err != nil {
		m.t.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(m.dir, ts, name), []byte(text), 0o644); err != nil {
			m.t.Fatal(err)
		}
	}
	tmp := filepath.Join(m.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		m.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(m.dir, "..data")); err != nil {
		m.t.Fatal(err)
	}
	for name := range files {
		link := m.path(name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			m.t.Fatal(err)
		}
	}
	if m.cur != "" {
		if err := os.RemoveAll(filepath.Join(m.dir, m.cur)); err != nil {
			m.t.Fatal(err)
		}
	}
	m.cur = ts
}

// watchPolicy is a policy file whose one catch-all policy has limit n.
func watchPolicy(n int) string {
	return fmt.Sprintf(`
defaults:
  on_store_error: local
policies:
  - name: all
    match: "*"
    limit: %d
    rate: 1
    period: 1s
`, n)
}

// watched is a sluice process, a client and the admin address, with the
// polls the watch tests share. Every poll is bounded by 10 s (the watch
// reacts within its 100 ms quiet interval) and paced by 20 ms.
type watched struct {
	t     *testing.T
	p     *proc
	c     *redis.Client
	admin string
	n     int // keys taken so far: each take is on a fresh key
}

func startWatched(t *testing.T, args ...string) *watched {
	t.Helper()
	p, admin := startWithAdmin(t, args...)
	return &watched{t: t, p: p, c: p.client(t), admin: admin}
}

// limit is the limit field of RL.TAKE's reply for a fresh key.
func (w *watched) limit() int64 {
	w.t.Helper()
	w.n++
	r, err := take(context.Background(), w.c, fmt.Sprintf("watch:%d", w.n), 1)
	if err != nil {
		w.t.Fatalf("RL.TAKE: %v", err)
	}
	return r.Limit
}

// waitLimit polls RL.TAKE until its limit is want.
func (w *watched) waitLimit(want int64) {
	w.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := w.limit()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("RL.TAKE's limit still %d 10s after the change, want %d:\n%s", got, want, w.p.Logs())
		}
		time.Sleep(20 * time.Millisecond) // pacing the poll, not synchronising
	}
}

// reloads are sluice_config_reloads_total{result="ok"} and {result="error"}
// and sluice_config_last_reload_successful.
func (w *watched) reloads() (ok, bad, last float64) {
	w.t.Helper()
	s := scrapeMetrics(w.t, w.admin)
	return s.v("sluice_config_reloads_total", "result", "ok"), s.v("sluice_config_reloads_total", "result", "error"),
		s.v("sluice_config_last_reload_successful")
}

// waitReloads polls the metrics until ok and bad reloads are at least
// these, and returns what it saw.
func (w *watched) waitReloads(ok, bad float64) (float64, float64, float64) {
	w.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		gotOK, gotBad, last := w.reloads()
		if gotOK >= ok && gotBad >= bad {
			return gotOK, gotBad, last
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("reloads ok %v error %v 10s after the change, want %v %v:\n%s", gotOK, gotBad, ok, bad, w.p.Logs())
		}
		time.Sleep(20 * time.Millisecond) // pacing the poll, not synchronising
	}
}

// wantReloads checks the counters are exactly these.
func (w *watched) wantReloads(what string, ok, bad, last float64) {
	w.t.Helper()
	gotOK, gotBad, gotLast := w.reloads()
	if gotOK != ok || gotBad != bad || gotLast != last {
		w.t.Errorf("%s: reloads ok %v error %v, last_reload_successful %v; want %v %v %v:\n%s",
			what, gotOK, gotBad, gotLast, ok, bad, last, w.p.Logs())
	}
}

// TestWatchConfigMapSwap: --config is a file of a mounted ConfigMap; the
// kubelet's symlink swap of a new payload reaches RL.TAKE without a
// restart or a signal, by one reload each time.
func TestWatchConfigMapSwap(t *testing.T) {
	t.Parallel()
	m := newConfigMap(t, map[string]string{"sluice.yaml": watchPolicy(10)})
	w := startWatched(t, "--config", m.path("sluice.yaml"))
	if got := w.limit(); got != 10 {
		t.Fatalf("limit at start = %d, want 10", got)
	}
	w.wantReloads("at start", 0, 0, 1)

	swapped := time.Now()
	m.update(map[string]string{"sluice.yaml": watchPolicy(20)})
	w.waitLimit(20)
	t.Logf("from the swap to the new limit in RL.TAKE: %v (the quiet interval is 100ms)", time.Since(swapped).Round(time.Millisecond))
	w.waitReloads(1, 0)
	// A second swap, seen by its own reload: the first gave exactly one.
	m.update(map[string]string{"sluice.yaml": watchPolicy(30)})
	w.waitLimit(30)
	w.waitReloads(2, 0)
	w.wantReloads("after two swaps", 2, 0, 1)
	if n := strings.Count(w.p.Logs(), `msg="config reloaded"`); n != 2 {
		t.Errorf("%d \"config reloaded\" lines after two swaps, want 2:\n%s", n, w.p.Logs())
	}
}

// TestWatchInvalidKeepsLastGood: an invalid payload swapped in is a failed
// reload, as by SIGHUP: the last good policy answers, the error is
// counted and logged with the field; a valid one swapped in after it is
// put in force.
func TestWatchInvalidKeepsLastGood(t *testing.T) {
	t.Parallel()
	m := newConfigMap(t, map[string]string{"sluice.yaml": watchPolicy(10)})
	w := startWatched(t, "--config", m.path("sluice.yaml"))

	m.update(map[string]string{"sluice.yaml": strings.Replace(watchPolicy(20), "limit:", "limt:", 1)})
	w.waitReloads(0, 1)
	w.wantReloads("after an invalid payload", 0, 1, 0)
	if got := w.limit(); got != 10 {
		t.Errorf("limit after an invalid payload = %d, want the last good 10", got)
	}
	for _, want := range []string{"config reload failed; keeping the last good config", "limt"} {
		if !strings.Contains(w.p.Logs(), want) {
			t.Errorf("the log lacks %q:\n%s", want, w.p.Logs())
		}
	}

	m.update(map[string]string{"sluice.yaml": watchPolicy(20)})
	w.waitLimit(20)
	w.waitReloads(1, 1)
	w.wantReloads("after a valid payload", 1, 1, 1)
}

// TestWatchEditorWrites: a plain file, changed the ways editors and
// scripts change one. A save by rename and an in-place write each reload
// once; a touch and a rewrite of the same bytes reload nothing; a file
// removed is left in force, and picked up when it comes back.
//
// "Nothing" is bounded by what the watch logs at debug level when it
// reads a file and finds it unchanged: the test waits for that line, so
// the touch and the rewrite have been seen and read before it looks at
// the counters; and the next real change counts exactly one more reload.
func TestWatchEditorWrites(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, watchPolicy(10))
	w := startWatched(t, "--config", path, "--log-level", "debug")
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const unchanged = `msg="watched file unchanged" flag=--config`

	// An editor's save: a new file renamed over the old one.
	write(path+".tmp", watchPolicy(20))
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	w.waitLimit(20)
	w.waitReloads(1, 0)

	// An in-place write (truncate, then write).
	write(path, watchPolicy(30))
	w.waitLimit(30)
	w.waitReloads(2, 0)
	w.wantReloads("after a rename and an in-place write", 2, 0, 1)

	// A touch, then the same bytes written again: read, found unchanged.
	seen := strings.Count(w.p.Logs(), unchanged)
	now := time.Now()
	if err := os.Chtimes(path, now, now); err != nil {
		t.Fatal(err)
	}
	write(path, watchPolicy(30))
	if !w.p.waitCount(unchanged, seen+1, 10*time.Second) {
		t.Fatalf("the rewrite of the same bytes was not read within 10s:\n%s", w.p.Logs())
	}
	w.wantReloads("after a touch and a rewrite of the same bytes", 2, 0, 1)

	// Removed: the config in force stays, nothing is reloaded.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if !w.p.waitLog(`msg="watched file gone; keeping what is in force until it comes back" flag=--config`, 10*time.Second) {
		t.Fatalf("the removal was not logged within 10s:\n%s", w.p.Logs())
	}
	if got := w.limit(); got != 30 {
		t.Errorf("limit with the file removed = %d, want 30", got)
	}
	// Back with new content: one reload, the first since the rename and
	// the write, so the touch and the rewrite reloaded nothing.
	write(path, watchPolicy(40))
	w.waitLimit(40)
	w.waitReloads(3, 0)
	w.wantReloads("after the file came back", 3, 0, 1)
}

// TestWatchConfigOff: --watch-config=false watches nothing, and SIGHUP
// alone reloads; without --config (the built-in policy) nothing is
// watched either.
func TestWatchConfigOff(t *testing.T) {
	t.Parallel()
	m := newConfigMap(t, map[string]string{"sluice.yaml": watchPolicy(10)})
	w := startWatched(t, "--config", m.path("sluice.yaml"), "--watch-config=false")
	m.update(map[string]string{"sluice.yaml": watchPolicy(20)})
	w.p.Signal(syscall.SIGHUP)
	w.waitLimit(20)
	w.waitReloads(1, 0)
	w.wantReloads("after a swap and SIGHUP", 1, 0, 1)
	for _, p := range []*proc{w.p, startSluice(t)} {
		for _, unwanted := range []string{"watching for changes", "watched file"} {
			if strings.Contains(p.Logs(), unwanted) {
				t.Errorf("the log has %q:\n%s", unwanted, p.Logs())
			}
		}
	}
}

// TestWatchSecretAndEnvoyVolumes: --aclfile in a mounted Secret and
// --envoy-config a mounted ConfigMap are watched too, each reloaded alone
// when its own volume is swapped: a new user pattern reaches an open
// connection, new Envoy rules are logged, and the policy file is not read
// again for either.
func TestWatchSecretAndEnvoyVolumes(t *testing.T) {
	t.Parallel()
	policies := newConfigMap(t, map[string]string{"sluice.yaml": aclPolicy})
	secret := newConfigMap(t, map[string]string{"users.acl": aclUsers})
	envoy := newConfigMap(t, map[string]string{"edge.yaml": "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: second, requests_per_unit: 10}\n"})
	w := startWatched(t, "--config", policies.path("sluice.yaml"), "--aclfile", secret.path("users.acl"), "--envoy-config", envoy.dir)
	acme := userClient(t, w.p.Addr, "acme", aclAcmePass)
	ctx := context.Background()
	if err := acme.Do(ctx, "RL.TAKE", "shared:x").Err(); err == nil {
		t.Fatal("acme took shared:x before the Secret changed")
	}

	secret.update(map[string]string{"users.acl": strings.Replace(aclUsers, "~acme:* ", "~acme:* ~shared:* ", 1)})
	deadline := time.Now().Add(10 * time.Second)
	for acme.Do(ctx, "RL.TAKE", "shared:x").Err() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("acme still refused shared:x 10s after the Secret changed:\n%s", w.p.Logs())
		}
		time.Sleep(20 * time.Millisecond) // pacing the poll, not synchronising
	}
	w.waitReloads(1, 0)

	envoy.update(map[string]string{"edge.yaml": "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 600}\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 7}\n"})
	if !w.p.waitLog(`msg="envoy config reloaded" dir=`+envoy.dir+` domains=1 rules=2`, 10*time.Second) {
		t.Fatalf("no envoy reload logged:\n%s", w.p.Logs())
	}
	w.waitReloads(2, 0)
	w.wantReloads("after a Secret and an Envoy swap", 2, 0, 1)
	logs := w.p.Logs()
	for line, want := range map[string]int{`msg="aclfile reloaded"`: 1, `msg="envoy config reloaded"`: 1, `msg="config reloaded"`: 0} {
		if n := strings.Count(logs, line); n != want {
			t.Errorf("%d %s lines, want %d:\n%s", n, line, want, logs)
		}
	}
}
