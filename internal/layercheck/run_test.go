package layercheck

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// TestLayers is the checker of issue 20: rapid drives two sluice processes
// in region eu (a 3+3 cluster, a home redis-server) through every door and
// layer, and each test case's replies must keep every key within its
// policy's bound. LAYERCHECK_DURATION (default 25s) bounds the run; the
// summary line counts operations, keys, violations and decided_by.
func TestLayers(t *testing.T) { runLayers(t, false) }

// runLayers is TestLayers, and with faults TestLayersNemesis.
func runLayers(t *testing.T, faults bool) {
	budget := 25 * time.Second
	if faults {
		budget = 45 * time.Second
	}
	if s := os.Getenv("LAYERCHECK_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("LAYERCHECK_DURATION=%q: %v", s, err)
		}
		budget = d
	}
	home := redistest.NewSingle(t)
	// Under the nemesis the cluster runs in a network namespace where it
	// can (root, iproute2), so that a primary's link can be cut.
	euCfg, noLink := localredis.Config{Primaries: 3, Replicas: 1, Log: io.Discard}, ""
	if faults {
		if err := localredis.CheckNetns(); err != nil {
			noLink = err.Error()
		} else {
			euCfg.Netns = true
		}
	}
	eu := redistest.NewCluster(t, euCfg)
	dir := t.TempDir()
	envoyDir := filepath.Join(dir, "envoy")
	if err := os.Mkdir(envoyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(envoyDir, "gw.yaml"), []byte(envoyRules), 0o600); err != nil {
		t.Fatal(err)
	}
	match, base := parseSet(t, cfg(false))
	_, alt := parseSet(t, cfg(true))
	w := &world{match: match, base: base, alt: alt, overrides: map[string]Variant{},
		stats:     stats{ops: map[string]int{}, by: map[string]int{}, categories: map[string]int{}, examples: map[string]string{}},
		keepGoing: os.Getenv("LAYERCHECK_KEEPGOING") != "", plainKeys: os.Getenv("LAYERCHECK_PLAIN") != "", skip: map[string]bool{}}
	for _, a := range strings.Split(os.Getenv("LAYERCHECK_SKIP"), ",") {
		w.skip[strings.TrimSpace(a)] = true
	}
	// Two users from an aclfile; LAYERCHECK_NOACL=1: none, as before
	// users existed (every client is everyone: the rival's checks fail).
	ownerCreds, rivalCreds, users := owner, rival, []string{"--aclfile", filepath.Join(dir, "users.acl")}
	if os.Getenv("LAYERCHECK_NOACL") != "" {
		ownerCreds, rivalCreds, users = creds{}, creds{}, nil
	} else if err := os.WriteFile(users[1], []byte(aclFile), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		path := filepath.Join(dir, fmt.Sprintf("sluice%d.yaml", i+1))
		if err := os.WriteFile(path, []byte(cfg(false)), 0o600); err != nil {
			t.Fatal(err)
		}
		w.procs = append(w.procs, startSluice(t, fmt.Sprintf("p%d", i+1), path, ownerCreds, rivalCreds,
			append([]string{"--cluster", strings.Join(eu.Addrs(), ","), "--region", "eu", "--home-redis", "redis://" + home.Addr,
				"--envoy-config", envoyDir}, users...)...))
		w.file = append(w.file, base)
		w.fileAlt = append(w.fileAlt, false)
	}
	var vs []Variant
	for _, v := range base {
		vs = append(vs, v)
	}
	w.tracker = NewTracker(time.Now(), vs...)
	ctx := context.Background()
	start := time.Now()
	deadline := start.Add(budget)
	failing := false
	t.Cleanup(func() { w.summary(t, time.Since(start)) })
	spent := func() bool { return time.Now().After(deadline) }
	if faults {
		w.nem = newNemesis(w, eu, home, noLink)
		// Longer histories: a fault must meet a key before and after it
		// (a kill's lost spends admitted again, a restarted bucket) within
		// one iteration, whose keys are its own.
		if !rapidSet["rapid.steps"] && os.Getenv("RAPID_STEPS") == "" {
			_ = flag.Set("rapid.steps", strconv.Itoa(nemesisSteps))
			t.Cleanup(func() { _ = flag.Set("rapid.steps", "25") })
		}
		w.keepGoing = true // faults do not replay: rapid's shrinking would chase another history
		if !w.nem.link {
			t.Logf("nemesis: no cut (skipped): %s", noLink)
		}
		if os.Getenv("CI") != "" && !w.nem.link {
			t.Errorf("CI: the nemesis cannot cut a link: %s", w.nem.noLink)
		}
		t.Logf("nemesis: seed %d (LAYERCHECK_NEMESIS_SEED), kinds %v", w.nem.seed, w.nem.kinds())
		go w.nem.run(t)
		t.Cleanup(w.nem.stopAndWait) // before the summary and the processes' stop
		// the run lasts the budget and at least until every kind ran
		// once, at most until the bounded run's 120 s are nearly spent
		hardStop := start.Add(max(budget, 110*time.Second))
		spent = func() bool {
			return time.Now().After(deadline) && w.nem.roundDone() || time.Now().After(hardStop)
		}
	}

	rapid.Check(t, func(t *rapid.T) {
		if !failing && spent() {
			return // the time budget is spent: the remaining checks are empty
		}
		w.mu.Lock()
		w.iter++
		w.stats.iterations++
		it := &iteration{w: w, n: w.iter, start: time.Now(), rl: map[string]*KeyLog{}, cl: map[string]*KeyLog{}}
		w.cur = it
		w.mu.Unlock()
		it.restore(t, ctx)
		defer func() {
			if t.Failed() {
				failing = true
			}
		}()
		t.Logf("iteration %d (keys contain i%d)", it.n, it.n)
		actions := it.actions(ctx)
		for a := range w.skip {
			delete(actions, a)
		}
		t.Repeat(actions)
		w.mu.Lock()
		w.stats.keys += len(it.rl) + len(it.cl)
		w.mu.Unlock()
		it.check(t)
		if t.Failed() {
			failing = true
		}
	})
}
