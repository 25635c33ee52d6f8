package compose

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-rl/sluice/internal/keyslot"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// The policies of sluice.yaml the experiments use.
const (
	sharedLimit = 20 // shared:*
	faultLimit  = 10 // open:*, closed:*, local:* (local_share 0.5), whole:* (local_share 1)
	localShare  = 0.5
)

// TestComposeUnderPodman runs docker-compose.cluster.yml under
// podman-compose, with only its images replaced (podman.override.yml), and
// does the cross-process lab's experiments in the lab's setting: up; the
// 3+3 cluster formed; both sluice containers take from one bucket; a
// primary paused with `podman pause` (the lab's `docker pause`) answers
// each on_store_error as docs/failure.md says and is strict again after
// unpause; down leaves no container, network or volume.
func TestComposeUnderPodman(t *testing.T) {
	redistest.SkipShort(t, "podman and podman-compose (two images, nine containers)")
	requireTools(t)
	top := readTopology(t)
	p := newPodman(t)

	var timings []string
	lap := func(what string, since time.Time) time.Time {
		now := time.Now()
		timings = append(timings, fmt.Sprintf("%s %.1fs", what, now.Sub(since).Seconds()))
		return now
	}
	t.Cleanup(func() { t.Log("timings: " + strings.Join(timings, ", ")) })

	mark := time.Now()
	redisImage, built := p.redisImage(t)
	mark = lap(map[bool]string{true: "redis image built", false: "redis image reused"}[built], mark)
	sluiceImage, built := p.sluiceImage(t)
	lap(map[bool]string{true: "sluice binary and image built", false: "sluice binary built, image reused"}[built], mark)
	if _, err := p.do("run", "--rm", "--network", "none", redisImage, "redis-server", "--version"); err != nil {
		containersCannotRun(t, err.Error())
	}
	for name, pub := range top.sluice {
		for _, addr := range []string{pub.resp, pub.admin} {
			l, err := net.Listen("tcp", addr)
			if err != nil {
				t.Fatalf("%s's host port %s is taken (%v): the compose file publishes fixed ports. An earlier run left behind? podman ps -a --filter label=%s", name, addr, err, projectLabel)
			}
			l.Close()
		}
	}

	c := &project{podman: p, name: uniqueName(), env: []string{"SLUICE_REDIS_IMAGE=" + redisImage, "SLUICE_IMAGE=" + sluiceImage}}
	t.Logf("project %s: redis %s, sluice %s", c.name, redisImage, sluiceImage)
	t.Cleanup(func() { c.down(t) })
	mark = time.Now()
	if out, err := c.compose(5*time.Minute, "up", "-d", "--no-build"); err != nil {
		t.Fatalf("up: %v", err)
	} else if m := failedRE.FindAllString(out, -1); m != nil {
		// podman-compose 1.0.3 goes on, and exits 0, when a podman run fails.
		t.Logf("up: podman-compose printed %q:\n%s", m, out)
	}
	svc, err := c.byService()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append(slices.Sorted(maps.Keys(top.redisPorts)), "cluster-init", "sluice-1", "sluice-2") {
		if svc[name] == "" {
			t.Fatalf("up: no container for service %s (have %v)", name, svc)
		}
	}
	cli := func(service string, args ...string) (string, error) {
		return c.redisCLI(svc[service], top.redisPorts[service], args...)
	}

	// The cluster: podman-compose does not wait for service_healthy or
	// service_completed_successfully (no systemd for healthchecks), so the
	// test waits for the state itself.
	var nodesOut string
	if err := poll(2*time.Minute, func() error {
		info, err := cli("redis-1", "cluster", "info")
		if err != nil {
			return err
		}
		if nodesOut, err = cli("redis-1", "cluster", "nodes"); err != nil {
			return err
		}
		return formed(info, nodesOut)
	}); err != nil {
		logs, _ := p.do("logs", svc["cluster-init"])
		t.Fatalf("the cluster did not form: %v\ncluster-init printed:\n%s", err, logs)
	}
	if code, err := p.do("inspect", "--format", "{{.State.ExitCode}}", svc["cluster-init"]); err != nil || strings.TrimSpace(code) != "0" {
		t.Errorf("cluster-init: exit code %q (%v), want 0", strings.TrimSpace(code), err)
	}
	nodes, _ := parseNodes(nodesOut)
	t.Logf("cluster formed: %s", describe(nodes))

	clients := map[string]*redis.Client{}
	for name, pub := range top.sluice {
		if err := poll(time.Minute, func() error {
			resp, err := http.Get("http://" + pub.admin + "/readyz")
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("/readyz: %s", resp.Status)
			}
			return nil
		}); err != nil {
			logs, _ := p.do("logs", svc[name])
			t.Fatalf("%s is not ready at %s: %v\n%s", name, pub.admin, err, logs)
		}
		clients[name] = sluiceClient(t, pub.resp)
	}
	mark = lap("up until both sluice ready", mark)

	t.Run("one limit across two containers", func(t *testing.T) {
		per, err := both(clients, func(c *redis.Client) ([]reply, error) { return takes(c, "shared:{acme}", 15) })
		if err != nil {
			t.Fatal(err)
		}
		var all []reply
		for _, name := range []string{"sluice-1", "sluice-2"} {
			var wrong []reply
			for _, r := range per[name] {
				if r.DecidedBy != "store" || r.Limit != sharedLimit {
					wrong = append(wrong, r)
				}
			}
			if len(wrong) > 0 {
				t.Errorf("%s: %d of %d replies not limit %d decided by the store (is SLUICE_CONFIG read?), the first %v", name, len(wrong), len(per[name]), sharedLimit, wrong[0])
			}
			all = append(all, per[name]...)
		}
		t.Logf("shared:{acme}, limit %d: sluice-1 admitted %d of %d, sluice-2 %d of %d; together %d of %d",
			sharedLimit, admitted(per["sluice-1"]), len(per["sluice-1"]), admitted(per["sluice-2"]), len(per["sluice-2"]), admitted(all), len(all))
		if got := admitted(all); got != sharedLimit {
			t.Errorf("the two containers admitted %d of %d, want exactly %d: they do not share one limit", got, len(all), sharedLimit)
		}
		if got, want := remainders(all), countdown(sharedLimit); !slices.Equal(got, want) {
			t.Errorf("remaining of the admitted takes %v, want each of %v once (one bucket, one decision at a time)", got, want)
		}
	})
	mark = lap("shared limit", mark)

	// The primary that owns {acme}'s slot, and a key on another one.
	slot := keyslot.Slot("{acme}")
	var owner clusterNode
	for _, n := range nodes {
		if n.primary() && n.owns(slot) {
			owner = n
		}
	}
	if owner.host == "" || svc[owner.host] == "" {
		t.Fatalf("no primary container owns slot %d of {acme}: %s", slot, nodesOut)
	}
	other := ""
	for i := 0; other == ""; i++ {
		tag := "ctl" + strconv.Itoa(i)
		if !owner.owns(keyslot.Slot("{" + tag + "}")) {
			other = "closed:{" + tag + "}"
		}
	}
	live := "redis-1"
	if owner.host == live {
		live = "redis-2"
	}
	keys := []string{"open:{acme}", "closed:{acme}", "local:{acme}", "whole:{acme}"}

	t.Run("paused primary", func(t *testing.T) {
		// Three takes of each key through the store first, so that the
		// store's count after the pause shows what the pause spent.
		for _, key := range keys {
			a, err := takes(clients["sluice-1"], key, 2)
			if err != nil {
				t.Fatal(err)
			}
			b, err := takes(clients["sluice-2"], key, 1)
			if err != nil {
				t.Fatal(err)
			}
			if rs := append(a, b...); admitted(rs) != 3 || decidedBy(rs) != "store=3" {
				t.Fatalf("%s before the pause: %v, want 3 admitted by the store", key, rs)
			}
		}
		if n, err := cli(owner.host, "cluster", "countkeysinslot", strconv.Itoa(slot)); err != nil || strings.TrimSpace(n) == "0" {
			t.Fatalf("%s holds %q keys in slot %d (%v): the keys are not where the test pauses", owner.host, strings.TrimSpace(n), slot, err)
		}

		pausedAt := time.Now()
		how, thaw := c.freeze(t, svc[owner.host])
		thawed := false
		unfreeze := func() {
			if !thawed {
				thawed = true
				if err := thaw(); err != nil {
					t.Errorf("thaw %s: %v", owner.host, err)
				}
			}
		}
		t.Cleanup(unfreeze)
		t.Logf("%s (%s, primary of slot %d) frozen by %s", owner.host, svc[owner.host], slot, how)

		// Each instance's breaker opens on its own: wait until both
		// answer from on_store_error, refusing all along.
		var probes []string
		for _, name := range []string{"sluice-1", "sluice-2"} {
			n := 0
			var wrong error
			if err := poll(30*time.Second, func() error {
				r, err := call(clients[name], "RL.TAKE", "closed:{acme}:probe")
				if err != nil {
					return err
				}
				n++
				if r.Allowed || (r.DecidedBy != "fallback-closed" && r.DecidedBy != "overload-closed") {
					wrong = fmt.Errorf("%s, closed:{acme}:probe %d after the freeze: %v, want refused by fallback-closed or overload-closed", name, n, r)
					return nil
				}
				if r.DecidedBy != "fallback-closed" {
					return fmt.Errorf("%s: %v", name, r)
				}
				return nil
			}); err != nil || wrong != nil {
				unfreeze()
				t.Fatalf("no fallback-closed answer: %v", errors.Join(wrong, err))
			}
			probes = append(probes, fmt.Sprintf("%s after %d takes", name, n))
		}
		fallbackAt := time.Now()

		// Each key through each container, 12 takes one after the other,
		// the eight streams at once; and a key on a live primary.
		type stream struct{ key, sluice string }
		var mu sync.Mutex
		got := map[stream][]reply{}
		var wg sync.WaitGroup
		var errs []error
		for _, key := range keys {
			for name, cl := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rs, err := inTurn(cl, key, 12)
					mu.Lock()
					defer mu.Unlock()
					got[stream{key, name}] = rs
					if err != nil {
						errs = append(errs, err)
					}
				}()
			}
		}
		wg.Wait()
		control, err := both(clients, func(c *redis.Client) ([]reply, error) { return takes(c, other, 1) })
		if err != nil {
			errs = append(errs, err)
		}
		pausedFor := time.Since(pausedAt)
		nodesDuring, _ := cli(live, "cluster", "nodes")
		unfreeze()
		unpausedAt := time.Now()
		for _, err := range errs {
			t.Error(err)
		}
		t.Logf("frozen %.1fs; both breakers open %.1fs after the freeze (%s)", pausedFor.Seconds(), fallbackAt.Sub(pausedAt).Seconds(), strings.Join(probes, ", "))

		// What docs/failure.md's table says each policy answers for a
		// dead node (on_store_error) or, before the breaker opens, an
		// overloaded one (on_overload, default).
		answers := map[string][]string{
			"open:{acme}":   {"fallback-open", "overload-local"},
			"closed:{acme}": {"fallback-closed", "overload-closed"},
			"local:{acme}":  {"fallback-local", "overload-local"},
			"whole:{acme}":  {"fallback-local", "overload-local"},
		}
		var slowest time.Duration
		for _, key := range keys {
			var all []reply
			var line []string
			for _, name := range []string{"sluice-1", "sluice-2"} {
				rs := got[stream{key, name}]
				for _, r := range rs {
					slowest = max(slowest, r.took)
					if !slices.Contains(answers[key], r.DecidedBy) {
						t.Errorf("%s through %s while %s was frozen: %v, want decided by one of %v (CLUSTER NODES of %s then:\n%s)", key, name, owner.host, r, answers[key], live, nodesDuring)
					}
					if r.DecidedBy == "fallback-open" && !r.Allowed {
						t.Errorf("%s through %s: %v; fallback-open admits", key, name, r)
					}
				}
				line = append(line, fmt.Sprintf("%s %d of %d (%s)", name, admitted(rs), len(rs), decidedBy(rs)))
				all = append(all, rs...)
			}
			t.Logf("paused, %s: admitted %s; together %d of %d", key, strings.Join(line, ", "), admitted(all), len(all))
			perInstance := func(want int) {
				t.Helper()
				for _, name := range []string{"sluice-1", "sluice-2"} {
					if got := admitted(got[stream{key, name}]); got != want {
						t.Errorf("%s through %s while paused: %d admitted, want %d (the instance's local bucket)", key, name, got, want)
					}
				}
			}
			switch key {
			case "open:{acme}":
				if n := admitted(all); n <= faultLimit {
					t.Errorf("open while paused: %d of %d admitted, want more than the limit %d (fail-open admits)", n, len(all), faultLimit)
				}
			case "closed:{acme}":
				if n := admitted(all); n != 0 {
					t.Errorf("closed while paused: %d admitted, want 0", n)
				}
			case "local:{acme}":
				perInstance(int(faultLimit * localShare))
			case "whole:{acme}":
				perInstance(faultLimit) // together twice the limit: the lab's in-process bucket
			}
		}
		t.Logf("paused: the slowest answer took %.0fms", float64(slowest)/float64(time.Millisecond))
		for name, rs := range control {
			if len(rs) != 1 || !rs[0].Allowed || rs[0].DecidedBy != "store" {
				t.Errorf("%s on a live primary, through %s, during the pause: %v, want admitted by the store", other, name, rs)
			}
		}

		// Strict again: both instances back on the store, one bucket per
		// key. Its count is the 3 spent before the pause plus the takes
		// that reached the frozen node before their deadline (a breaker's
		// probe, or before it opened): they ran when it woke, spent and
		// never answered (docs/failure.md: a call that timed out is never
		// replayed). Nothing the fallbacks admitted is written there.
		for name, cl := range clients {
			if err := poll(time.Minute, func() error {
				r, err := call(cl, "RL.PEEK", "closed:{acme}")
				if err != nil {
					return err
				}
				if r.DecidedBy != "store" {
					return fmt.Errorf("%s: RL.PEEK closed:{acme}: %v", name, r)
				}
				return nil
			}); err != nil {
				t.Fatalf("not back on the store after the thaw: %v", err)
			}
		}
		t.Logf("both instances decided by the store %.1fs after the thaw", time.Since(unpausedAt).Seconds())
		for _, key := range keys {
			peek, err := call(clients["sluice-1"], "RL.PEEK", key)
			if err != nil {
				t.Fatal(err)
			}
			left := int(peek.Remaining)
			if peek.DecidedBy != "store" || left > faultLimit-3 {
				t.Errorf("%s after the thaw: RL.PEEK %v, want decided by the store with at most %d left (the limit %d less the 3 spent before the pause)", key, peek, faultLimit-3, faultLimit)
			}
			per, err := both(clients, func(c *redis.Client) ([]reply, error) { return takes(c, key, 6) })
			if err != nil {
				t.Fatal(err)
			}
			all := append(per["sluice-1"], per["sluice-2"]...)
			t.Logf("after the thaw, %s: %d left in the store (%d spent late by takes that reached the frozen node); sluice-1 admitted %d of 6, sluice-2 %d of 6 (%s)",
				key, left, faultLimit-3-left, admitted(per["sluice-1"]), admitted(per["sluice-2"]), decidedBy(all))
			if decidedBy(all) != "store=12" {
				t.Errorf("%s after the thaw: %s, want every take decided by the store", key, decidedBy(all))
			}
			if got, want := remainders(all), countdown(left); !slices.Equal(got, want) {
				t.Errorf("%s after the thaw: remaining of the admitted %v, want %v: exactly the %d the store had left, one at a time", key, got, want, left)
			}
		}
		if err := poll(time.Minute, func() error {
			info, err := cli(live, "cluster", "info")
			if err != nil {
				return err
			}
			if nodesOut, err = cli(live, "cluster", "nodes"); err != nil {
				return err
			}
			return formed(info, nodesOut)
		}); err != nil {
			t.Errorf("the cluster is not whole again after the thaw: %v", err)
		}
		after, _ := parseNodes(nodesOut)
		t.Logf("cluster after the thaw: %s", describe(after))
	})
	mark = lap("pause, fail policies, thaw, strict again", mark)

	t.Run("down leaves nothing", func(t *testing.T) {
		c.down(t)
		containers, networks, volumes, err := c.leftovers()
		if err != nil {
			t.Fatal(err)
		}
		if len(containers)+len(networks)+len(volumes) > 0 {
			t.Fatalf("after down: containers %q, networks %q, volumes %q; want none", containers, networks, volumes)
		}
		t.Logf("after down: 0 containers, 0 networks, 0 volumes of project %s (checked %d anonymous volumes by name)", c.name, len(c.volumes))
	})
	lap("down", mark)
}

var failedRE = regexp.MustCompile(`exit code: [1-9][0-9]*`)

// both runs f on each instance's client at once.
func both(clients map[string]*redis.Client, f func(*redis.Client) ([]reply, error)) (map[string][]reply, error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := map[string][]reply{}
	var first error
	for name, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs, err := f(c)
			mu.Lock()
			defer mu.Unlock()
			out[name] = rs
			if err != nil && first == nil {
				first = fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	wg.Wait()
	return out, first
}

// describe says which service is primary of which slots, and whose
// replica each other is.
func describe(nodes []clusterNode) string {
	host := map[string]string{}
	for _, n := range nodes {
		host[n.id] = n.host
	}
	var parts []string
	for _, n := range nodes {
		if n.primary() {
			parts = append(parts, fmt.Sprintf("%s primary %v", n.host, n.slots))
		} else {
			parts = append(parts, fmt.Sprintf("%s replica of %s", n.host, host[n.master]))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}
