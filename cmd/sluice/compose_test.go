package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-rl/sluice/app"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"gopkg.in/yaml.v3"
)

// The Docker files are checked without Docker: TestComposeFile reads
// docker-compose.cluster.yml, Dockerfile and .dockerignore and checks that
// they describe the topology they claim; TestComposeTopology runs that same
// topology from redis-server binaries, as `sluice-lab cluster up` does.

const (
	composePath      = "../../docker-compose.cluster.yml"
	dockerfilePath   = "../../Dockerfile"
	dockerignorePath = "../../.dockerignore"
	goModPath        = "../../go.mod"
)

// composeFile is the part of the Compose specification these tests read.
// Unknown keys are ignored, so that adding environment or volumes to a
// service does not break the test.
type composeFile struct {
	Services map[string]*composeService `yaml:"services"`
}

type composeService struct {
	Image       string        `yaml:"image"`
	Build       *composeBuild `yaml:"build"`
	Entrypoint  argList       `yaml:"entrypoint"`
	Command     argList       `yaml:"command"`
	Ports       []composePort `yaml:"ports"`
	DependsOn   dependsOn     `yaml:"depends_on"`
	Healthcheck *struct {
		Test argList `yaml:"test"`
	} `yaml:"healthcheck"`
	Restart string `yaml:"restart"`
}

// argList is a command in either Compose form: a list, or a string (split
// on spaces here, which is enough for the checks below).
type argList []string

func (l *argList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*l = strings.Fields(n.Value)
		return nil
	case yaml.SequenceNode:
		var s []string
		if err := n.Decode(&s); err != nil {
			return err
		}
		*l = s
		return nil
	}
	return fmt.Errorf("line %d: a command must be a string or a list", n.Line)
}

// composeBuild is `build: .` or `build: {context: ., dockerfile: Dockerfile}`.
type composeBuild struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
}

func (b *composeBuild) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		b.Context = n.Value
		return nil
	}
	type plain composeBuild
	return n.Decode((*plain)(b))
}

// dependsOn maps each dependency to its condition, in either form (a list
// of names means service_started).
type dependsOn map[string]string

func (d *dependsOn) UnmarshalYAML(n *yaml.Node) error {
	*d = dependsOn{}
	switch n.Kind {
	case yaml.SequenceNode:
		var names []string
		if err := n.Decode(&names); err != nil {
			return err
		}
		for _, name := range names {
			(*d)[name] = "service_started"
		}
		return nil
	case yaml.MappingNode:
		var m map[string]struct {
			Condition string `yaml:"condition"`
		}
		if err := n.Decode(&m); err != nil {
			return err
		}
		for name, v := range m {
			if v.Condition == "" {
				v.Condition = "service_started"
			}
			(*d)[name] = v.Condition
		}
		return nil
	}
	return fmt.Errorf("line %d: depends_on must be a list or a map", n.Line)
}

// composePort is one published port, short ("127.0.0.1:6380:6380") or long
// syntax.
type composePort struct {
	Raw, HostIP, Published, Target string
}

func (p *composePort) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		var long struct {
			HostIP    string `yaml:"host_ip"`
			Published string `yaml:"published"`
			Target    string `yaml:"target"`
		}
		if err := n.Decode(&long); err != nil {
			return err
		}
		*p = composePort{Raw: fmt.Sprintf("%+v", long), HostIP: long.HostIP, Published: long.Published, Target: long.Target}
		return nil
	}
	p.Raw = n.Value
	spec, _, _ := strings.Cut(n.Value, "/") // "/tcp"
	parts := strings.Split(spec, ":")
	switch len(parts) {
	case 1:
		p.Target = parts[0]
	case 2:
		p.Published, p.Target = parts[0], parts[1]
	case 3:
		p.HostIP, p.Published, p.Target = parts[0], parts[1], parts[2]
	default:
		return fmt.Errorf("line %d: port %q: want [ip:]host:container", n.Line, n.Value)
	}
	return nil
}

func loadCompose(t *testing.T) *composeFile {
	t.Helper()
	data, err := os.ReadFile(composePath)
	if err != nil {
		t.Fatalf("the compose file: %v", err)
	}
	var c composeFile
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("%s is not valid YAML for Compose: %v", composePath, err)
	}
	if len(c.Services) == 0 {
		t.Fatalf("%s has no services", composePath)
	}
	return &c
}

// argValue returns the value of --name (or -name, --name=v) in args.
func argValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		k, v, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if k != name {
			continue
		}
		if hasValue {
			return v, true
		}
		if i+1 < len(args) {
			return args[i+1], true
		}
		return "", true
	}
	return "", false
}

// withoutFlags drops --name value (and --name=value) for each name in drop.
func withoutFlags(args []string, drop ...string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		k, _, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if strings.HasPrefix(args[i], "-") && slices.Contains(drop, k) {
			if !hasValue {
				i++
			}
			continue
		}
		out = append(out, args[i])
	}
	return out
}

var redisNodeRE = regexp.MustCompile(`^redis-[0-9]+$`)

// isOfficialRedis: the Docker Official Image, not a fork or a mirror.
func isOfficialRedis(image string) bool {
	for _, p := range []string{"redis:", "library/redis:", "docker.io/library/redis:"} {
		if strings.HasPrefix(image, p) {
			return true
		}
	}
	return false
}

// dockerfile is the parsed Dockerfile: its instructions, by stage.
type dockerfile struct {
	stages []dfStage
}

type dfStage struct {
	image, name string
	instrs      []dfInstr
}

type dfInstr struct {
	cmd, args string
	line      int
}

func parseDockerfile(t *testing.T, text string) *dockerfile {
	t.Helper()
	df := &dockerfile{}
	var cur strings.Builder
	start := 0
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if cont, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(trimmed)
		full := strings.TrimSpace(cur.String())
		cur.Reset()
		if full == "" {
			continue
		}
		cmd, args, _ := strings.Cut(full, " ")
		in := dfInstr{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start}
		if in.cmd == "FROM" {
			var f []string
			for _, w := range strings.Fields(in.args) {
				if !strings.HasPrefix(w, "--") { // --platform=…
					f = append(f, w)
				}
			}
			if len(f) == 0 {
				t.Fatalf("Dockerfile:%d: FROM without an image", in.line)
			}
			st := dfStage{image: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			df.stages = append(df.stages, st)
			continue
		}
		if len(df.stages) == 0 {
			if in.cmd == "ARG" {
				continue
			}
			t.Fatalf("Dockerfile:%d: %s before the first FROM", in.line, in.cmd)
		}
		st := &df.stages[len(df.stages)-1]
		st.instrs = append(st.instrs, in)
	}
	if len(df.stages) == 0 {
		t.Fatal("Dockerfile has no FROM")
	}
	return df
}

// last returns the stage's last instruction cmd, if any.
func (s *dfStage) last(cmd string) (dfInstr, bool) {
	for i := len(s.instrs) - 1; i >= 0; i-- {
		if s.instrs[i].cmd == cmd {
			return s.instrs[i], true
		}
	}
	return dfInstr{}, false
}

// execForm parses ["a", "b"]; a shell-form ENTRYPOINT or CMD would run under
// /bin/sh -c, which the runtime image lacks, and would keep SIGTERM from
// reaching sluice.
func execForm(t *testing.T, in dfInstr) []string {
	t.Helper()
	var argv []string
	if err := json.Unmarshal([]byte(in.args), &argv); err != nil || len(argv) == 0 {
		t.Fatalf("Dockerfile:%d: %s %s must be in exec form, a JSON array (there is no shell in the image, and SIGTERM must reach sluice)", in.line, in.cmd, in.args)
	}
	return argv
}

// goVersionAtLeast reports whether the golang image tag (1.26, 1.26.3,
// 1.26-bookworm) is at least the go.mod go line (1.26.0): the official image
// sets GOTOOLCHAIN=local, so an older one cannot build the module.
func goVersionAtLeast(tag, want string) bool {
	num := func(s string) []int {
		s, _, _ = strings.Cut(s, "-")
		var out []int
		for _, p := range strings.Split(s, ".") {
			n, err := strconv.Atoi(p)
			if err != nil {
				return nil
			}
			out = append(out, n)
		}
		return out
	}
	have, need := num(tag), num(want)
	if len(have) < 2 || len(need) < 2 {
		return false
	}
	for i := range need {
		if i >= len(have) { // "1.26" means the newest 1.26.x
			return true
		}
		if have[i] != need[i] {
			return have[i] > need[i]
		}
	}
	return true
}

// serveArgs checks that argv runs `sluice serve` with flags that `sluice
// serve` accepts, and returns them parsed.
func serveArgs(t *testing.T, where string, argv []string) *app.Config {
	t.Helper()
	if len(argv) < 2 || path.Base(argv[0]) != "sluice" || argv[1] != "serve" {
		t.Fatalf("%s: runs %q, want /sluice serve …", where, argv)
	}
	var msg bytes.Buffer
	f, err := parseServeFlags(argv[2:], &msg)
	if err != nil {
		t.Fatalf("%s: `sluice serve` rejects %q: %v\n%s", where, argv[2:], err, msg.String())
	}
	for _, a := range []struct{ flag, addr string }{{"listen", f.Listen}, {"admin", f.Admin}} {
		host, port, err := net.SplitHostPort(a.addr)
		if err != nil || port == "0" || (host != "0.0.0.0" && host != "" && host != "::") {
			t.Fatalf("%s: --%s %q: in a container sluice must listen on all interfaces at a fixed port (0.0.0.0:PORT), or the published port reaches nothing", where, a.flag, a.addr)
		}
	}
	return f
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

func TestComposeFile(t *testing.T) {
	t.Parallel()
	c := loadCompose(t)
	df := parseDockerfileFile(t)

	// The six Redis nodes.
	var nodeAddrs []string // redis-N:PORT, by service name
	nodePorts := map[string]string{}
	for name, s := range c.Services {
		runsRedis := len(s.Command) > 0 && s.Command[0] == "redis-server"
		n, _ := strconv.Atoi(strings.TrimPrefix(name, "redis-"))
		if isNode := redisNodeRE.MatchString(name) && n >= 1 && n <= 6; runsRedis != isNode {
			t.Errorf("service %s: runs redis-server = %v; exactly the services redis-1 … redis-6 run redis-server", name, runsRedis)
		}
	}
	for i := 1; i <= 6; i++ {
		name := fmt.Sprintf("redis-%d", i)
		s, ok := c.Services[name]
		if !ok {
			t.Fatalf("no service %s: the cluster needs redis-1 … redis-6", name)
		}
		if !isOfficialRedis(s.Image) {
			t.Errorf("service %s: image %q, want the official redis:<tag>", name, s.Image)
		}
		if len(s.Command) == 0 || s.Command[0] != "redis-server" {
			t.Fatalf("service %s: command %q, want redis-server …", name, s.Command)
		}
		if v, _ := argValue(s.Command, "cluster-enabled"); v != "yes" {
			t.Errorf("service %s: --cluster-enabled %q, want yes", name, v)
		}
		port, ok := argValue(s.Command, "port")
		if n, err := strconv.Atoi(port); !ok || err != nil || n <= 0 || n > 65535-10000 {
			t.Fatalf("service %s: --port %q, want a port of its own (the bus port is port+10000)", name, port)
		}
		for other, p := range nodePorts {
			if p == port {
				t.Errorf("services %s and %s both use port %s: each node needs its own", other, name, port)
			}
		}
		nodePorts[name] = port
		nodeAddrs = append(nodeAddrs, name+":"+port)
		if s.Healthcheck == nil || !strings.Contains(strings.Join(s.Healthcheck.Test, " "), "-p "+port+" ping") {
			t.Errorf("service %s: want a healthcheck `redis-cli -p %s ping` (cluster-init waits for it)", name, port)
		}
	}

	// cluster-init joins exactly those six, with one replica each.
	ci, ok := c.Services["cluster-init"]
	if !ok {
		t.Fatal("no service cluster-init (redis-cli --cluster create …)")
	}
	if !isOfficialRedis(ci.Image) {
		t.Errorf("cluster-init: image %q, want the official redis:<tag> (for its redis-cli)", ci.Image)
	}
	words := strings.Fields(strings.Join(ci.Command, " "))
	create := -1
	for i := 0; i+1 < len(words); i++ {
		if words[i] == "--cluster" && words[i+1] == "create" {
			create = i + 2
			break
		}
	}
	if create < 0 {
		t.Fatalf("cluster-init: command %q has no `redis-cli --cluster create`", ci.Command)
	}
	var created []string
	for _, w := range words[create:] {
		if strings.HasPrefix(w, "-") {
			break
		}
		created = append(created, strings.TrimSuffix(w, ";"))
	}
	if !slices.Equal(slices.Sorted(slices.Values(created)), slices.Sorted(slices.Values(nodeAddrs))) {
		t.Errorf("cluster-init: --cluster create names %q, want exactly the six nodes %q", created, nodeAddrs)
	}
	if v, _ := argValue(words, "cluster-replicas"); v != "1" {
		t.Errorf("cluster-init: --cluster-replicas %q, want 1 (3 primaries, 3 replicas)", v)
	}
	if !slices.Contains(words, "--cluster-yes") {
		t.Error("cluster-init: without --cluster-yes redis-cli waits for a `yes` nobody types")
	}
	for _, n := range nodeAddrs {
		name, _, _ := strings.Cut(n, ":")
		if cond := ci.DependsOn[name]; cond != "service_healthy" {
			t.Errorf("cluster-init: depends_on %s %q, want condition service_healthy", name, cond)
		}
	}
	if ci.Restart != "no" && ci.Restart != "" {
		t.Errorf("cluster-init: restart %q, want \"no\": it runs once", ci.Restart)
	}
	// redis-cli makes the first len/(replicas+1) nodes named the primaries.
	var primaries []string
	if len(created) >= 3 {
		primaries = slices.Sorted(slices.Values(created[:3]))
	}

	// The Dockerfile: a golang builder, a small runtime, /sluice serve.
	mod, err := os.ReadFile(goModPath)
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\S+)`).FindSubmatch(mod)
	builder := ""
	for _, st := range df.stages[:len(df.stages)-1] {
		img := strings.TrimPrefix(strings.TrimPrefix(st.image, "docker.io/"), "library/")
		tag, isGo := strings.CutPrefix(img, "golang:")
		if !isGo {
			continue
		}
		if goLine != nil && !goVersionAtLeast(tag, string(goLine[1])) {
			t.Errorf("Dockerfile: FROM %s is older than go.mod's go %s", st.image, goLine[1])
		}
		for _, in := range st.instrs {
			if in.cmd != "RUN" || !strings.Contains(in.args, "go build") {
				continue
			}
			// The image holds the server only: sluice-lab, the labs and the
			// cluster launcher stay out of it.
			for _, pkg := range regexp.MustCompile(`\./\S*`).FindAllString(in.args, -1) {
				if pkg != "./cmd/sluice" {
					t.Errorf("Dockerfile:%d: builds %s; the image holds ./cmd/sluice only", in.line, pkg)
				}
			}
			if strings.Contains(in.args, "./cmd/sluice") {
				builder = st.name
				if !strings.Contains(in.args, "CGO_ENABLED=0") {
					t.Errorf("Dockerfile:%d: build with CGO_ENABLED=0, the runtime image has no libc", in.line)
				}
			}
		}
	}
	if builder == "" {
		t.Fatal("Dockerfile: no `FROM golang:… AS <name>` stage that runs `go build … ./cmd/sluice`")
	}
	final := &df.stages[len(df.stages)-1]
	if strings.Contains(final.image, "golang") {
		t.Errorf("Dockerfile: the final stage is %s; ship the binary on a small runtime image", final.image)
	}
	binPath := ""
	for _, in := range final.instrs {
		if in.cmd == "COPY" && strings.Contains(in.args, "--from="+builder) {
			f := strings.Fields(in.args)
			binPath = f[len(f)-1]
		}
	}
	if binPath == "" {
		t.Fatalf("Dockerfile: the final stage does not COPY --from=%s", builder)
	}
	if u, ok := final.last("USER"); ok {
		if user, _, _ := strings.Cut(u.args, ":"); user == "root" || user == "0" {
			t.Errorf("Dockerfile:%d: USER %s; run as a non-root user", u.line, u.args)
		}
	} else if !strings.HasSuffix(final.image, ":nonroot") {
		t.Error("Dockerfile: the final stage sets no USER; run as a non-root user")
	}
	ep, ok := final.last("ENTRYPOINT")
	if !ok {
		t.Fatal("Dockerfile: no ENTRYPOINT")
	}
	entrypoint := execForm(t, ep)
	if len(entrypoint) != 1 || entrypoint[0] != binPath {
		t.Errorf("Dockerfile:%d: ENTRYPOINT %q, want [%q], the binary copied from the builder", ep.line, entrypoint, binPath)
	}
	cmdIn, ok := final.last("CMD")
	if !ok {
		t.Fatal("Dockerfile: no CMD")
	}
	defaults := serveArgs(t, fmt.Sprintf("Dockerfile:%d: ENTRYPOINT + CMD", cmdIn.line), append(slices.Clone(entrypoint), execForm(t, cmdIn)...))
	exposed := map[string]bool{}
	for _, in := range final.instrs {
		if in.cmd == "EXPOSE" {
			for _, p := range strings.Fields(in.args) {
				exposed[strings.TrimSuffix(p, "/tcp")] = true
			}
		}
	}
	for _, p := range []string{portOf(defaults.Listen), portOf(defaults.Admin)} {
		if !exposed[p] {
			t.Errorf("Dockerfile: CMD listens on %s but does not EXPOSE it", p)
		}
	}

	// The two sluice instances: this Dockerfile, serve, the three primaries.
	for _, name := range []string{"sluice-1", "sluice-2"} {
		s, ok := c.Services[name]
		if !ok {
			t.Fatalf("no service %s", name)
		}
		if s.Build == nil || path.Clean(s.Build.Context) != "." || (s.Build.Dockerfile != "" && s.Build.Dockerfile != "Dockerfile") {
			t.Errorf("service %s: build %+v, want context . and the Dockerfile", name, s.Build)
		}
		argv := slices.Clone(s.Entrypoint)
		if len(argv) == 0 {
			argv = slices.Clone(entrypoint)
		}
		argv = append(argv, s.Command...)
		f := serveArgs(t, "service "+name, argv)
		if f.Cluster == "" {
			t.Fatalf("service %s: no --cluster", name)
		}
		seeds := slices.Sorted(slices.Values(strings.Split(f.Cluster, ",")))
		if !slices.Equal(seeds, primaries) {
			t.Errorf("service %s: --cluster %s, want the three primaries %s", name, f.Cluster, strings.Join(primaries, ","))
		}
		var targets []string
		for _, p := range s.Ports {
			targets = append(targets, p.Target)
		}
		slices.Sort(targets)
		want := slices.Sorted(slices.Values([]string{portOf(f.Listen), portOf(f.Admin)}))
		if !slices.Equal(targets, want) {
			t.Errorf("service %s: publishes container ports %q, want the ports sluice listens on, %q", name, targets, want)
		}
		if cond := s.DependsOn["cluster-init"]; cond != "service_completed_successfully" {
			t.Errorf("service %s: depends_on cluster-init %q, want condition service_completed_successfully", name, cond)
		}
	}

	// Every published port: on loopback only, and each host port once.
	hostPorts := map[string]string{}
	for name, s := range c.Services {
		for _, p := range s.Ports {
			if p.HostIP != "127.0.0.1" {
				t.Errorf("service %s: port %s is published on %q; bind it to 127.0.0.1 (no Redis or unauthenticated sluice on the LAN)", name, p.Raw, p.HostIP)
			}
			if p.Published == "" {
				t.Errorf("service %s: port %s has no fixed host port", name, p.Raw)
				continue
			}
			if other, dup := hostPorts[p.Published]; dup {
				t.Errorf("host port %s is published by both %s and %s", p.Published, other, name)
			}
			hostPorts[p.Published] = name
		}
		for dep := range s.DependsOn {
			if _, ok := c.Services[dep]; !ok {
				t.Errorf("service %s depends_on %q, which is not a service", name, dep)
			}
		}
	}

	// .dockerignore must not drop what the build needs.
	ignore, err := os.ReadFile(dockerignorePath)
	if err != nil {
		t.Fatalf(".dockerignore: %v (without it the build context carries .git and the binaries)", err)
	}
	for _, line := range strings.Split(string(ignore), "\n") {
		pat := strings.TrimSpace(line)
		if pat == "" || strings.HasPrefix(pat, "#") || strings.HasPrefix(pat, "!") {
			continue
		}
		// Patterns are anchored at the context root; **/ matches any depth.
		pat = path.Clean(strings.TrimPrefix(pat, "/"))
		anyDepth := strings.HasPrefix(pat, "**/")
		pat = strings.TrimPrefix(pat, "**/")
		for _, need := range []string{"go.mod", "go.sum", "cmd", "cmd/sluice", "cmd/sluice/main.go", "lua", "lua/gcra.lua", "limit/limit.go"} {
			names := []string{need}
			for i, r := range need {
				if r == '/' && anyDepth {
					names = append(names, need[i+1:])
				}
			}
			for _, name := range names {
				if m, _ := path.Match(pat, name); m {
					t.Errorf(".dockerignore: %q excludes %s, which the build needs", line, need)
					break
				}
			}
		}
	}
}

func parseDockerfileFile(t *testing.T) *dockerfile {
	t.Helper()
	data, err := os.ReadFile(dockerfilePath)
	if err != nil {
		t.Fatalf("the Dockerfile: %v", err)
	}
	return parseDockerfile(t, string(data))
}

var adminRE = regexp.MustCompile(`msg="admin listening" addr=(\S+)`)

// TestComposeTopology runs what docker-compose.cluster.yml describes, from
// redis-server binaries instead of containers: the cluster with the file's
// node count and --cluster-replicas, and two sluice processes with the
// file's flags (loopback and free ports instead of 0.0.0.0:6380). The two
// must share one limit.
func TestComposeTopology(t *testing.T) {
	t.Parallel()
	// Not requireTool: this test stands in for `docker compose up`, so a
	// machine without redis-server fails it instead of skipping it.
	redistest.SkipShort(t, "redis-server")
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not found on PATH; scripts/ensure-redis.sh installs it")
	}
	c := loadCompose(t)
	nodes := 0
	for name := range c.Services {
		if redisNodeRE.MatchString(name) {
			nodes++
		}
	}
	ci := c.Services["cluster-init"]
	if ci == nil {
		t.Fatal("no service cluster-init")
	}
	rv, _ := argValue(strings.Fields(strings.Join(ci.Command, " ")), "cluster-replicas")
	replicas, err := strconv.Atoi(rv)
	if err != nil || replicas < 1 || nodes%(replicas+1) != 0 {
		t.Fatalf("compose: %d nodes with --cluster-replicas %q is no cluster", nodes, rv)
	}
	primaries := nodes / (replicas + 1)

	// What `sluice-lab cluster up --primaries P --replicas R` starts.
	rc := redistest.NewCluster(t, localredis.Config{Primaries: primaries, Replicas: replicas})
	seeds := strings.Join(rc.Addrs(), ",")
	if n := len(rc.Addrs()); n != primaries {
		t.Fatalf("the cluster has %d primaries (%s), want %d", n, seeds, primaries)
	}

	cfg := writeConfig(t, `
policies:
  - name: compose
    match: "*"
    limit: 10
    rate: 10
    period: 1h
    on_store_error: closed
    deny_cache: false         # the test watches the store and the failure policy, not the deny cache
`)
	var clients []*redis.Client
	for _, name := range []string{"sluice-1", "sluice-2"} {
		s := c.Services[name]
		if s == nil || len(s.Command) == 0 || s.Command[0] != "serve" {
			t.Fatalf("compose: service %s does not run serve", name)
		}
		args := withoutFlags(s.Command[1:], "listen", "admin", "cluster")
		args = append(args, "--admin", "127.0.0.1:0", "--cluster", seeds, "--config", cfg)
		p := startSluice(t, args...)
		clients = append(clients, p.client(t))
		am := adminRE.FindStringSubmatch(p.Logs())
		if am == nil {
			t.Fatalf("%s logged no admin address:\n%s", name, p.Logs())
		}
		resp, err := http.Get("http://" + am[1] + "/readyz")
		if err != nil {
			t.Fatalf("%s /readyz: %v", name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "cluster") {
			t.Fatalf("%s /readyz: %d %q, want 200 ok cluster", name, resp.StatusCode, body)
		}
	}

	// 6 takes through sluice-1, then 6 through sluice-2: one bucket of 10.
	key := "compose:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	admitted := 0
	for i := range 12 {
		r, err := take(context.Background(), clients[i/6], key, 1)
		if err != nil {
			t.Fatalf("take %d through sluice-%d: %v", i+1, i/6+1, err)
		}
		if r.DecidedBy != "store" || r.Limit != 10 {
			t.Fatalf("take %d through sluice-%d: %+v, want limit 10 decided by the store", i+1, i/6+1, r)
		}
		wantAllowed := i < 10
		if r.Allowed != wantAllowed || (r.Allowed && r.Remaining != int64(9-i)) {
			t.Errorf("take %d through sluice-%d: %+v, want allowed=%v remaining=%d", i+1, i/6+1, r, wantAllowed, max(9-i, 0))
		}
		if r.Allowed {
			admitted++
		}
	}
	if admitted != 10 {
		t.Fatalf("two sluice instances admitted %d of 12, want 10: they do not share one limit", admitted)
	}
}
