package main

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

const regionConfig = `defaults:
  on_store_error: closed
policies:
  - name: checkout
    match: "checkout:*"
    limit: 20
    rate: 10
    period: 1s
    scope: global
    region_floor: 0.1
  - name: local
    match: "*"
    limit: 5
    rate: 1
    period: 1s
`

// TestRegionsEndToEnd: two sluice processes in region eu (a Redis Cluster)
// and one in region us (a single Redis) share one global budget kept in a
// home redis-server: redis-cli sees decided_by region, the three together
// admit at most the budget, RL.REGIONS shows both regions, INFO and
// /metrics count the allocation; a regional policy beside it is untouched;
// when us's own Redis stops, its on_store_error (closed) answers.
func TestRegionsEndToEnd(t *testing.T) {
	t.Parallel()
	cli := requireTool(t, "redis-cli")
	home := redistest.NewSingle(t)
	eu := redistest.NewCluster(t, localredis.Config{Primaries: 3, Replicas: -1})
	usNode := redistest.NewSingle(t)
	cfg := writeConfig(t, regionConfig)
	homeURL := "redis://" + home.Addr
	euArgs := []string{"--cluster", strings.Join(eu.Addrs(), ","), "--region", "eu", "--home-redis", homeURL, "--config", cfg}
	eu1 := startSluice(t, append(euArgs, "--admin", "127.0.0.1:0")...)
	eu2 := startSluice(t, euArgs...)
	us := startSluice(t, "--redis", "redis://"+usNode.Addr, "--region", "us", "--home-redis", homeURL, "--config", cfg)

	host, port := hostPort(t, eu1.Addr)
	out, err := exec.Command(cli, "-h", host, "-p", port, "RL.TAKE", "checkout:acme").CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "region") {
		t.Fatalf("redis-cli RL.TAKE checkout:acme: %v\n%s", err, out)
	}

	// Every instance hammers the one global key for 2 s.
	ctx := context.Background()
	start := time.Now()
	var mu sync.Mutex
	admitted, byRegion := 0, 0
	var wg sync.WaitGroup
	for _, p := range []*proc{eu1, eu2, us} {
		c := p.client(t)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; n < 2000 && time.Since(start) < 2*time.Second; n++ {
					r, err := take(ctx, c, "checkout:acme", 1)
					if err != nil {
						t.Errorf("RL.TAKE: %v", err)
						return
					}
					mu.Lock()
					if r.Allowed {
						admitted++
					}
					if r.DecidedBy == "region" {
						byRegion++
					}
					mu.Unlock()
					time.Sleep(2 * time.Millisecond)
				}
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	// the budget, plus what each region's floor (limit 2, 1/s) may admit
	// before its first claim is answered, plus the redis-cli take
	bound := 20 + 10*elapsed + 2*(2+1*elapsed) + 1
	t.Logf("admitted %d in %.2fs across 3 instances in 2 regions (bound %.0f); %d decided_by region", admitted, elapsed, bound, byRegion)
	if float64(admitted) > bound {
		t.Errorf("admitted %d > %.0f: the regions together exceeded the global budget", admitted, bound)
	}
	if admitted < 20 {
		t.Errorf("admitted %d: less than the burst", admitted)
	}
	if byRegion == 0 {
		t.Error("no reply said decided_by region")
	}

	// RL.REGIONS on eu1 shows eu (self) and, once the boards were read, us.
	var regions []any
	poll(t, "RL.REGIONS lists eu and us", func() bool {
		regions, err = eu1.client(t).Do(ctx, "RL.REGIONS").Slice()
		return err == nil && len(regions) == 2
	})
	self, other := regions[0].([]any), regions[1].([]any)
	if self[1] != "eu" || self[3] != int64(1) || other[1] != "us" || other[3] != int64(0) {
		t.Errorf("RL.REGIONS = %v", regions)
	}

	info, err := eu1.client(t).Info(ctx).Result()
	if err != nil || !strings.Contains(info, "# Region") || !strings.Contains(info, "region:eu") || !strings.Contains(info, "decided_by_region:") {
		t.Errorf("INFO lacks the region section: %v\n%s", err, info)
	}
	m := adminAddrRE.FindStringSubmatch(eu1.Logs())
	if m == nil {
		t.Fatal("no admin address logged")
	}
	resp, err := http.Get("http://" + m[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`sluice_region_tokens_claimed_total{region="eu"}`, `sluice_region_home_reachable{region="eu"} 1`, `decided_by="region"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// A regional policy is decided by the region's store as before.
	if r, err := take(ctx, us.client(t), "other", 1); err != nil || r.DecidedBy != "store" || r.Limit != 5 {
		t.Errorf("regional policy: %+v, %v", r, err)
	}
	// When us's own Redis stops answering, on_store_error decides (as
	// overload-closed while the node's breaker still waits for it, the
	// same policy: on_overload defaults to on_store_error).
	if err := usNode.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = usNode.Resume() }()
	r, err := take(ctx, us.client(t), "checkout:acme", 1)
	if err != nil || r.Allowed || (r.DecidedBy != "fallback-closed" && r.DecidedBy != "overload-closed") {
		t.Errorf("global policy with the regional store down: %+v, %v; want fallback-closed or overload-closed", r, err)
	}
}

// TestRegionFlags: the flags that need each other say so.
func TestRegionFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--region", "eu"}, "--region needs a home store"},
		{[]string{"--home-redis", "redis://127.0.0.1:1"}, "need --region NAME"},
		{[]string{"--region", "eu", "--home-redis", "redis://127.0.0.1:1", "--home-cluster", "127.0.0.1:2"}, "exclusive"},
		{[]string{"--home-user", "u"}, "--home-pass-file need a home store"},
		{[]string{"--home-tls-ca-file", "ca.pem", "--redis", "redis://127.0.0.1:1"}, "--home-pass-file need a home store"},
		{[]string{"--region", "eu", "--home-redis", "redis://127.0.0.1:1", "--home-pass-file", "/nonexistent"}, "--home-pass-file"},
		{[]string{"--region", "eu", "--home-cluster", "127.0.0.1:1", "--home-tls-cert-file", "c.pem"}, "--home-tls-cert-file and --home-tls-key-file go together"},
	} {
		_, err := parseServeFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// aclUser makes user, with password pass and every right, on each node.
func aclUser(t *testing.T, user, pass string, nodes ...*localredis.Node) {
	t.Helper()
	for _, n := range nodes {
		if err := n.Client().Do(t.Context(), "ACL", "SETUSER", user, "reset", "on", ">"+pass, "~*", "&*", "+@all").Err(); err != nil {
			t.Fatalf("ACL SETUSER %s on %s: %v", user, n.Addr, err)
		}
	}
}

// lockDefault gives the default user of each node the password pass, so
// that a connection without credentials gets NOAUTH (the nodes' own
// clients stay authenticated).
func lockDefault(t *testing.T, pass string, nodes ...*localredis.Node) {
	t.Helper()
	for _, n := range nodes {
		if err := n.Client().Do(t.Context(), "ACL", "SETUSER", "default", "resetpass", ">"+pass).Err(); err != nil {
			t.Fatalf("ACL SETUSER default on %s: %v", n.Addr, err)
		}
	}
}

// regionInfo is the # Region section of p's INFO, field by field.
func regionInfo(t *testing.T, c *redis.Client) map[string]int64 {
	t.Helper()
	info, err := c.Info(t.Context(), "everything").Result()
	if err != nil {
		t.Fatalf("INFO: %v", err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if n, err := strconv.ParseInt(v, 10, 64); ok && err == nil && strings.HasPrefix(k, "region_") {
			out[k] = n
		}
	}
	return out
}

// homeAnswers sends RL.TAKE of a global key, one no other process used,
// to p until a token admitted from the region's pool shows that home
// answered claims: decided_by region, region_home_reachable 1.
func homeAnswers(t *testing.T, p *proc, key string) {
	t.Helper()
	c := p.client(t)
	poll(t, "home answers claims: tokens admitted from the region's pool", func() bool {
		r, err := take(t.Context(), c, key, 1)
		if err != nil || r.DecidedBy != "region" {
			t.Fatalf("RL.TAKE %s: %+v, %v; want decided_by region", key, r, err)
		}
		s := regionInfo(t, c)
		return s["region_pool_admitted"] > 0 && s["region_home_reachable"] == 1
	})
}

// homeRefuses sends RL.TAKE of a global key, one no other process used,
// to p until the region counts a failed call to home, and checks that home
// gave it nothing: no token claimed, none admitted from the key's pool
// (what was admitted, the floor did).
func homeRefuses(t *testing.T, p *proc, key string) {
	t.Helper()
	c := p.client(t)
	poll(t, "a call to home fails", func() bool {
		if r, err := take(t.Context(), c, key, 1); err != nil || r.DecidedBy != "region" {
			t.Fatalf("RL.TAKE %s: %+v, %v; want decided_by region (the floor)", key, r, err)
		}
		return regionInfo(t, c)["region_home_errors"] > 0
	})
	s := regionInfo(t, c)
	if s["region_tokens_claimed"] != 0 || s["region_pool_admitted"] != 0 || s["region_home_reachable"] != 0 {
		t.Errorf("home refused the credentials, yet claimed %d, pool admitted %d, home reachable %d",
			s["region_tokens_claimed"], s["region_pool_admitted"], s["region_home_reachable"])
	}
}

// homeUsers counts the connections to home by ACL user, but for the
// test's own (named "test").
func homeUsers(t *testing.T, home *redis.Client) map[string]int {
	t.Helper()
	list, err := home.ClientList(t.Context()).Result()
	if err != nil {
		t.Fatalf("CLIENT LIST at home: %v", err)
	}
	users := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		fields := map[string]string{}
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			fields[k] = v
		}
		if fields["name"] != "test" {
			users[fields["user"]]++
		}
	}
	return users
}

// TestRegionHomeCredentials: the home store of --home-redis takes the
// credentials of its URL, which --home-user and --home-pass-file (or
// SLUICE_HOME_USER and SLUICE_HOME_PASS) override, and never those of the
// regional store (--store-user, --store-pass-file): home has the regional
// store's ACL user too, with the same password, so that had they been
// sent, home would have taken them (and CLIENT LIST at home would show
// that user). The global policy is served from the region's pool only
// when home's own credentials are right.
func TestRegionHomeCredentials(t *testing.T) {
	const (
		regPass     = "reg-pw-Ta17"
		homePass    = "home-pw-Hb28"
		homeDefault = "home-default-pw-Dd40"
		wrongPass   = "wrong-pw-Wc39"
	)
	regional, home := redistest.NewSingle(t), redistest.NewSingle(t)
	aclUser(t, "reg", regPass, regional)
	aclUser(t, "reg", regPass, home) // the trap
	aclUser(t, "home", homePass, home)
	lockDefault(t, homeDefault, home)
	lockDefault(t, "unknown-pw-Ue51", regional)
	atHome := redis.NewClient(&redis.Options{Addr: home.Addr, Username: "home", Password: homePass, ClientName: "test", MaxRetries: -1})
	t.Cleanup(func() { _ = atHome.Close() })

	store := []string{"--redis", "redis://" + regional.Addr, "--store-user", "reg", "--store-pass-file", writeSecret(t, "reg-pass", regPass),
		"--config", writeConfig(t, regionConfig), "--region", "eu", "--timeout", "1s"}
	homePassFile, wrongPassFile := writeSecret(t, "home-pass", homePass), writeSecret(t, "wrong-pass", wrongPass)
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		user string // the user home sees; "" = home refuses
	}{
		{"no home credentials", []string{"--home-redis", "redis://" + home.Addr}, nil, ""},
		{"the URL's user and password", []string{"--home-redis", "redis://home:" + homePass + "@" + home.Addr}, nil, "home"},
		{"the URL's password", []string{"--home-redis", "redis://:" + homeDefault + "@" + home.Addr}, nil, "default"},
		{"--home-user and --home-pass-file over the URL's", []string{"--home-redis", "redis://default:" + wrongPass + "@" + home.Addr,
			"--home-user", "home", "--home-pass-file", homePassFile}, nil, "home"},
		{"--home-pass-file over the URL's, the URL's user", []string{"--home-redis", "redis://home:" + wrongPass + "@" + home.Addr,
			"--home-pass-file", homePassFile}, nil, "home"},
		{"a wrong --home-pass-file over the URL's right password", []string{"--home-redis", "redis://home:" + homePass + "@" + home.Addr,
			"--home-pass-file", wrongPassFile}, nil, ""},
		{"SLUICE_HOME_USER and SLUICE_HOME_PASS", []string{"--home-redis", "redis://" + home.Addr},
			map[string]string{"SLUICE_HOME_USER": "home", "SLUICE_HOME_PASS": homePass}, "home"},
	} {
		key := "checkout:" + strings.ReplaceAll(tc.name, " ", "-")
		t.Run(tc.name, func(t *testing.T) {
			// Only this case's connections at home: not those of the
			// nodes' own clients or of the processes before.
			for _, user := range []string{"default", "home", "reg"} {
				if err := atHome.Do(t.Context(), "CLIENT", "KILL", "USER", user, "SKIPME", "yes").Err(); err != nil {
					t.Fatalf("CLIENT KILL USER %s: %v", user, err)
				}
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			p := startSluice(t, append(slices.Clone(store), tc.args...)...)
			if r, err := take(t.Context(), p.client(t), "regional", 1); err != nil || r.DecidedBy != "store" {
				t.Fatalf("a regional key: %+v, %v; want decided_by store (the regional store takes --store-user)", r, err)
			}
			if tc.user == "" {
				homeRefuses(t, p, key)
			} else {
				homeAnswers(t, p, key)
			}
			users := homeUsers(t, atHome)
			if users["reg"] > 0 {
				t.Errorf("home has %d connection(s) as the regional store's user reg: its credentials went to home", users["reg"])
			}
			if tc.user != "" && users[tc.user] == 0 {
				t.Errorf("home has no connection as %s: %v", tc.user, users)
			}
			p.Stop()
			checkNoSecrets(t, "the log", p.Logs(), regPass, homePass, homeDefault, wrongPass)
		})
	}
}

// TestRegionHomeCluster: --home-cluster takes --home-user and
// --home-pass-file; the regional store's --store-user and
// --store-pass-file, even when they would be right for home, never go to
// home.
func TestRegionHomeCluster(t *testing.T) {
	t.Parallel()
	const homePass = "home-cluster-pw-Kq62"
	home := redistest.NewCluster(t, localredis.Config{Primaries: 3, Replicas: -1})
	aclUser(t, "home", homePass, home.Nodes()...)
	lockDefault(t, "unknown-pw-Ue51", home.Nodes()...)
	regional := redistest.NewSingle(t)
	aclUser(t, "home", homePass, regional)
	passFile := writeSecret(t, "pass", homePass)
	args := []string{"--redis", "redis://" + regional.Addr, "--config", writeConfig(t, regionConfig), "--region", "eu",
		"--home-cluster", strings.Join(home.Addrs(), ","), "--timeout", "1s"}

	withHome := startSluice(t, append(slices.Clone(args), "--home-user", "home", "--home-pass-file", passFile)...)
	homeAnswers(t, withHome, "checkout:with-home-flags")
	withStore := startSluice(t, append(slices.Clone(args), "--store-user", "home", "--store-pass-file", passFile)...)
	if r, err := take(t.Context(), withStore.client(t), "regional", 1); err != nil || r.DecidedBy != "store" {
		t.Fatalf("a regional key: %+v, %v; want decided_by store", r, err)
	}
	homeRefuses(t, withStore, "checkout:with-store-flags")
}

// TestRegionHomeTLS: home and the regional store each speak TLS with
// their own CA, client certificate and password (--home-tls-* and
// --store-tls-*); --home-tls makes a redis:// home URL use TLS;
// --home-tls-server-name names the certificate's host; and without
// --home-tls-ca-file home's certificate does not verify, whatever
// --store-tls-ca-file says.
func TestRegionHomeTLS(t *testing.T) {
	t.Parallel()
	const regPass, homePass = "reg-tls-pw-Lr73", "home-tls-pw-Ms84"
	regFiles, homeFiles := redistest.NewTLSFiles(t), redistest.NewTLSFiles(t)
	regional, home := startTLSRedisPass(t, regFiles, regPass), startTLSRedisPass(t, homeFiles, homePass)
	store := []string{"--redis", "rediss://" + regional, "--store-tls-ca-file", regFiles.CA,
		"--store-tls-cert-file", regFiles.ClientCert, "--store-tls-key-file", regFiles.ClientKey,
		"--store-pass-file", writeSecret(t, "reg-pass", regPass),
		"--config", writeConfig(t, regionConfig), "--region", "eu", "--timeout", "2s", "--home-timeout", "2s",
		"--home-pass-file", writeSecret(t, "home-pass", homePass), "--home-tls-cert-file", homeFiles.ClientCert, "--home-tls-key-file", homeFiles.ClientKey}
	for _, tc := range []struct {
		name  string
		args  []string
		works bool
	}{
		{"rediss", []string{"--home-redis", "rediss://" + home, "--home-tls-ca-file", homeFiles.CA}, true},
		{"--home-tls", []string{"--home-redis", "redis://" + home, "--home-tls", "--home-tls-ca-file", homeFiles.CA, "--home-tls-server-name", "localhost"}, true},
		{"no --home-tls-ca-file", []string{"--home-redis", "rediss://" + home}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startSluice(t, append(slices.Clone(store), tc.args...)...)
			if r, err := take(t.Context(), p.client(t), "regional", 1); err != nil || r.DecidedBy != "store" {
				t.Fatalf("a regional key: %+v, %v; want decided_by store", r, err)
			}
			key := "checkout:" + strings.ReplaceAll(tc.name, " ", "-")
			if tc.works {
				homeAnswers(t, p, key)
			} else {
				homeRefuses(t, p, key)
			}
		})
	}
}
