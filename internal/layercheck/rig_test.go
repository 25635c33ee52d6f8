package layercheck

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// binary is the sluice binary built once by TestMain from this tree.
var binary string

// rapidSet are the rapid flags the command line set.
var rapidSet map[string]bool

func TestMain(m *testing.M) {
	flag.Parse()
	// rapid's defaults, unless the command line set them: many short
	// checks (the time budget ends the run), no fail files in the tree.
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for name, v := range map[string]string{"rapid.checks": "100000", "rapid.steps": "25", "rapid.nofailfile": "true", "rapid.shrinktime": "20s"} {
		if !set[name] && os.Getenv(strings.ToUpper(strings.ReplaceAll(name, ".", "_"))) == "" {
			_ = flag.Set(name, v)
		}
	}
	rapidSet = set
	if testing.Short() {
		os.Exit(m.Run()) // no binary to build: every test that runs it starts Redis first, by redistest, which skips it
	}
	dir, err := os.MkdirTemp("", "sluice-layercheck-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "sluice")
	build := exec.Command("go", "build", "-o", binary, "../../cmd/sluice")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building sluice:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one running sluice process and its three doors' clients: the
// owner's (embedded: p.rc, p.take, …) and the rival tenant's.
type proc struct {
	name     string
	cfgPath  string
	addr     string
	grpcAddr string
	args     []string // serve's arguments after the doors' addresses
	*tenant
	rival *tenant

	// life is held by what must not meet a restart of the process (a
	// reload: its SIGHUP and the log line it waits for) and by the
	// nemesis while it kills and restarts it.
	life sync.Mutex

	mu   sync.Mutex
	logs strings.Builder
	run  *run // the running process; replaced by restart
}

// run is one process of a proc: its command, closed done once it exited.
type run struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (p *proc) current() *run {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.run
}

var (
	listenRE = regexp.MustCompile(`msg="sluice listening" addr=(\S+)`)
	httpRE   = regexp.MustCompile(`msg="http listening" addr=(\S+)`)
	grpcRE   = regexp.MustCompile(`msg="grpc listening" addr=(\S+)`)
)

// creds are a user's name and password; the zero value sends none.
type creds struct{ user, pass string }

// tenant is one user's clients of one process's three doors, each sending
// the user's credentials: RESP AUTH user pass, HTTP Basic, gRPC metadata
// authorization: Bearer user:pass.
type tenant struct {
	creds
	role     string // owner or rival, whatever the credentials
	httpAddr string
	rc       *redis.Client
	hc       *http.Client
	gc       rlsv3.RateLimitServiceClient
	gconn    *grpc.ClientConn
}

func newTenant(t *testing.T, role string, c creds, addr, httpAddr, grpcAddr string) *tenant {
	t.Helper()
	tn := &tenant{creds: c, role: role, httpAddr: httpAddr}
	tn.rc = redis.NewClient(&redis.Options{Addr: addr, Username: c.user, Password: c.pass, PoolSize: 32, MaxRetries: -1, ReadTimeout: 5 * time.Second})
	var rt http.RoundTripper = &http.Transport{MaxIdleConnsPerHost: 16}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if c.user != "" {
		rt = basicAuth{c, rt}
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(c)))
	}
	tn.hc = &http.Client{Timeout: 5 * time.Second, Transport: rt}
	var err error
	if tn.gconn, err = grpc.NewClient(grpcAddr, opts...); err != nil {
		t.Fatal(err)
	}
	tn.gc = rlsv3.NewRateLimitServiceClient(tn.gconn)
	t.Cleanup(func() { _ = tn.rc.Close(); _ = tn.gconn.Close() })
	return tn
}

// sluiceUser is the user sluice sees tn as: its own, or "default" when it
// sends no credentials.
func (tn *tenant) sluiceUser() string {
	if tn.user == "" {
		return "default"
	}
	return tn.user
}

// basicAuth sends its user's credentials with every HTTP request.
type basicAuth struct {
	c    creds
	base http.RoundTripper
}

func (b basicAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.SetBasicAuth(b.c.user, b.c.pass)
	return b.base.RoundTrip(r)
}

// bearer is the gRPC door's credentials of c: metadata authorization:
// Bearer user:pass.
type bearer creds

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.user + ":" + b.pass}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// startSluice runs `sluice serve` with args and waits until it listens;
// it is stopped (SIGTERM, then SIGKILL, by its pid) at cleanup. The
// owner's clients send owner's credentials, the rival's rival's (both
// zero: no credentials, one tenant).
func startSluice(t *testing.T, name, cfgPath string, owner, rival creds, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cfgPath: cfgPath, args: args}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			logs := p.Logs()
			if len(logs) > 6000 {
				logs = "…" + logs[len(logs)-6000:]
			}
			t.Logf("sluice %s log (tail):\n%s", name, logs)
		}
	})
	addr, err := p.spawn("127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = addr
	logs := p.Logs() // the doors are logged before "sluice listening"
	hm, gm := httpRE.FindStringSubmatch(logs), grpcRE.FindStringSubmatch(logs)
	if hm == nil || gm == nil {
		t.Fatalf("sluice %s: no http or grpc address logged:\n%s", name, logs)
	}
	p.grpcAddr = gm[1]
	p.tenant = newTenant(t, "owner", owner, p.addr, hm[1], p.grpcAddr)
	p.rival = newTenant(t, "rival", rival, p.addr, hm[1], p.grpcAddr)
	return p
}

// spawn starts the process on the doors' addresses given and waits until
// it listens; it returns the RESP door's address.
func (p *proc) spawn(listen, httpAddr, grpcAddr string) (string, error) {
	full := append([]string{"serve", "--listen", listen, "--admin", "", "--config", p.cfgPath,
		"--http", httpAddr, "--grpc", grpcAddr}, p.args...)
	r := &run{cmd: exec.Command(binary, full...), done: make(chan struct{})}
	stderr, err := r.cmd.StderrPipe()
	if err != nil {
		return "", err
	}
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		return "", err
	}
	p.mu.Lock()
	p.run = r
	p.mu.Unlock()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.logs.WriteString(line + "\n")
			p.mu.Unlock()
			if m := listenRE.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	select {
	case a := <-addr:
		return a, nil
	case <-r.done:
		return "", fmt.Errorf("sluice %s exited before listening: %v\n%s", p.name, r.err, p.Logs())
	case <-time.After(30 * time.Second):
		return "", fmt.Errorf("sluice %s did not listen within 30s:\n%s", p.name, p.Logs())
	}
}

// crash kills the process with SIGKILL, as a crash would, and after down
// starts it again on the same three doors' addresses and config file, so
// that the clients reconnect. p.life must be held.
func (p *proc) crash(down time.Duration) error {
	r := p.current()
	if err := r.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("kill %s (pid %d): %v", p.name, r.cmd.Process.Pid, err)
	}
	<-r.done
	time.Sleep(down)
	deadline := time.Now().Add(20 * time.Second)
	for {
		// the ports were ours a moment ago; a bind may fail while the
		// kernel lets go of them
		_, err := p.spawn(p.addr, p.tenant.httpAddr, p.grpcAddr)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Logs returns what the process has written to stderr so far.
func (p *proc) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

func (p *proc) stop() {
	p.life.Lock() // not while the nemesis restarts it
	defer p.life.Unlock()
	r := p.current()
	if r == nil {
		return
	}
	select {
	case <-r.done:
		return
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}

// reload rewrites the process's config file, sends SIGHUP and waits (by
// polling its log) until the reload is logged. It returns when the signal
// was sent and when the reload was seen.
func (p *proc) reload(yaml string) (sent, recv time.Time, err error) {
	p.life.Lock()
	defer p.life.Unlock()
	if err := os.WriteFile(p.cfgPath, []byte(yaml), 0o600); err != nil {
		return sent, recv, err
	}
	before := strings.Count(p.Logs(), `msg="config reloaded"`) + strings.Count(p.Logs(), "config reload failed")
	sent = time.Now()
	if err := p.current().cmd.Process.Signal(syscall.SIGHUP); err != nil {
		return sent, recv, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		logs := p.Logs()
		if strings.Count(logs, `msg="config reloaded"`)+strings.Count(logs, "config reload failed") > before {
			// the reload's own line: what follows it may say "failed" of
			// something else (a client's dial to a node that is down)
			line, _, _ := strings.Cut(logs[strings.LastIndex(logs, "config reload"):], "\n")
			if strings.Contains(line, "failed") {
				return sent, time.Now(), fmt.Errorf("reload of %s failed:\n%s", p.name, line)
			}
			return sent, time.Now(), nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return sent, time.Now(), fmt.Errorf("%s: no reload logged within 10s", p.name)
}

// reply is RL.TAKE's six fields.
type reply struct {
	Allowed    int64
	Limit      int64
	Remaining  int64
	RetryAfter int64
	ResetAfter int64
	DecidedBy  string
}

func (r reply) String() string {
	return fmt.Sprintf("[%d %d %d %d %d %s]", r.Allowed, r.Limit, r.Remaining, r.RetryAfter, r.ResetAfter, r.DecidedBy)
}

func parseReply(v any) (reply, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 6 {
		return reply{}, fmt.Errorf("reply %v is not a 6-element array", v)
	}
	var n [5]int64
	for i := range 5 {
		x, ok := a[i].(int64)
		if !ok {
			return reply{}, fmt.Errorf("reply %v: element %d is %T, want integer", v, i+1, a[i])
		}
		n[i] = x
	}
	by, ok := a[5].(string)
	if !ok {
		return reply{}, fmt.Errorf("reply %v: element 6 is %T, want bulk string", v, a[5])
	}
	return reply{n[0], n[1], n[2], n[3], n[4], by}, nil
}

// shapeError says what is wrong with a reply's shape, or "".
func shapeError(r reply, cost int64) string {
	switch {
	case r.Allowed != 0 && r.Allowed != 1:
		return "allowed is not 0 or 1"
	case r.Remaining < 0 || r.Remaining > r.Limit:
		return "remaining outside [0, limit]"
	case r.Allowed == 1 && r.RetryAfter != -1:
		return "allowed with retry_after != -1"
	case r.Allowed == 0 && cost > r.Limit && r.RetryAfter != -1:
		return "cost > limit with retry_after != -1"
	case r.Allowed == 0 && cost <= r.Limit && r.RetryAfter <= 0 && !strings.HasPrefix(r.DecidedBy, "fallback-") && !strings.HasPrefix(r.DecidedBy, "overload-"):
		return "rejected with retry_after <= 0"
	}
	return ""
}

func (p *tenant) take(ctx context.Context, cmd, key string, cost int64) (reply, error) {
	v, err := p.rc.Do(ctx, cmd, key, cost).Result()
	if err != nil {
		return reply{}, err
	}
	return parseReply(v)
}

func (p *tenant) httpTake(ctx context.Context, key string, cost int64) (reply, error) {
	body, _ := json.Marshal(map[string]any{"key": key, "cost": cost})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.httpAddr+"/v1/take", strings.NewReader(string(body)))
	if err != nil {
		return reply{}, err
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return reply{}, &httpError{resp.StatusCode, string(b)}
	}
	var j struct {
		Allowed      *bool   `json:"allowed"`
		Limit        *int64  `json:"limit"`
		Remaining    *int64  `json:"remaining"`
		RetryAfterMs *int64  `json:"retry_after_ms"`
		ResetAfterMs *int64  `json:"reset_after_ms"`
		DecidedBy    *string `json:"decided_by"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return reply{}, fmt.Errorf("body %q: %v", b, err)
	}
	if j.Allowed == nil || j.Limit == nil || j.Remaining == nil || j.RetryAfterMs == nil || j.ResetAfterMs == nil || j.DecidedBy == nil {
		return reply{}, fmt.Errorf("body %q lacks one of the six fields", b)
	}
	r := reply{Limit: *j.Limit, Remaining: *j.Remaining, RetryAfter: *j.RetryAfterMs, ResetAfter: *j.ResetAfterMs, DecidedBy: *j.DecidedBy}
	if *j.Allowed {
		r.Allowed = 1
	}
	return r, nil
}

// httpError is an HTTP door's answer other than 200.
type httpError struct {
	status int
	body   string
}

func (e *httpError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.body) }
