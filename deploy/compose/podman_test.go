package compose

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Paths relative to this directory, and the compose files as podman-compose
// is given them, relative to the repository root (its working directory).
const (
	repoRoot     = "../.."
	composeFile  = "docker-compose.cluster.yml"
	overrideFile = "deploy/compose/podman.override.yml"
	configFile   = "deploy/compose/sluice.yaml"
	confFile     = "containers.conf"
	containerf   = "Containerfile"
)

// The labels podman-compose puts on what it creates; docker compose sets
// the second too. Names differ (podman-compose 1.0.3: P_service_1, docker
// compose: P-service-1), so containers are found by label, never by name.
const (
	projectLabel = "com.docker.compose.project"
	serviceLabel = "com.docker.compose.service"
)

// redisRecipe makes the Redis image: Debian bookworm's redis-server (and
// redis-cli, a dependency) on a minimal base, with what the official
// redis image gives the compose file: /data owned by the redis user as the
// working directory and a volume (nodes.conf lives there), run as redis.
// The image is tagged by the hash of this recipe, so a second run reuses it.
var redisRecipe = struct {
	mmdebstrap, changes []string
}{
	mmdebstrap: []string{"--variant=minbase", "--include=redis-server",
		`--customize-hook=mkdir -p "$1/data" && chroot "$1" chown redis:redis /data`, "bookworm"},
	changes: []string{"WORKDIR /data", "VOLUME /data", "USER redis", `CMD ["redis-server"]`},
}

// podman runs podman and podman-compose with this directory's
// containers.conf, in the repository root.
type podman struct {
	root string   // absolute path of the repository
	env  []string // the environment of every command
}

func newPodman(t *testing.T) *podman {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := filepath.Abs(confFile)
	if err != nil {
		t.Fatal(err)
	}
	return &podman{root: root, env: append(os.Environ(), "CONTAINERS_CONF="+conf)}
}

// commandError is a command that failed: what ran and what it printed.
type commandError struct {
	argv []string
	err  error
	out  string
}

func (e *commandError) Error() string {
	return fmt.Sprintf("`%s`: %v\n%s", strings.Join(e.argv, " "), e.err, strings.TrimSpace(e.out))
}

// run runs name with args within timeout (a guard against a hung command,
// not a measure) and returns its combined output.
func (p *podman) run(timeout time.Duration, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = p.root
	cmd.Env = append(slices.Clone(p.env), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (gave up after %s)", err, timeout)
		}
		return out.String(), &commandError{append([]string{name}, args...), err, out.String()}
	}
	return out.String(), nil
}

// do runs one podman command.
func (p *podman) do(args ...string) (string, error) {
	return p.run(2*time.Minute, nil, "podman", args...)
}

// containersCannotRun skips the test, or fails it when CI is set, saying
// exactly which command could not run and what it printed.
func containersCannotRun(t *testing.T, why string) {
	t.Helper()
	msg := "containers cannot run here: " + why + "\n(scripts/ensure-containers.sh installs podman, podman-compose, runc and mmdebstrap; docs/compose.md)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg + "\nCI is set: this fails the build instead of skipping")
	}
	t.Skip(msg)
}

// requireTools checks that the tools the test drives are on PATH.
func requireTools(t *testing.T) {
	t.Helper()
	var missing []string
	for _, tool := range []string{"podman", "podman-compose", "runc", "mmdebstrap", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		containersCannotRun(t, strings.Join(missing, ", ")+" not found on PATH")
	}
}

func contentTag(repo string, parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write(p)
	}
	return repo + ":" + hex.EncodeToString(h.Sum(nil))[:12]
}

// redisImage returns the Redis image, built from redisRecipe unless an
// image of the same recipe exists. A build that cannot run skips the test
// (or fails it on CI) with what the command printed.
func (p *podman) redisImage(t *testing.T) (image string, built bool) {
	t.Helper()
	image = contentTag("localhost/sluice-compose-redis",
		[]byte(strings.Join(redisRecipe.mmdebstrap, "\n")), []byte(strings.Join(redisRecipe.changes, "\n")))
	if _, err := p.do("image", "exists", image); err == nil {
		return image, false
	}
	rootfs := filepath.Join(t.TempDir(), "rootfs.tar")
	args := append([]string{"--quiet"}, redisRecipe.mmdebstrap...)
	if _, err := p.run(5*time.Minute, nil, "mmdebstrap", append(args, rootfs)...); err != nil {
		containersCannotRun(t, err.Error())
	}
	args = []string{"import", "--quiet"}
	for _, c := range redisRecipe.changes {
		args = append(args, "--change", c)
	}
	if _, err := p.do(append(args, rootfs, image)...); err != nil {
		containersCannotRun(t, err.Error())
	}
	return image, true
}

// sluiceImage builds the sluice binary as the Dockerfile does (static,
// CGO_ENABLED=0, -trimpath) and returns an image of it made by the
// Containerfile, tagged by the hash of both, reused when it exists.
func (p *podman) sluiceImage(t *testing.T) (image string, built bool) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "sluice")
	// -buildvcs=false: the image depends on the sources, not on the commit.
	if _, err := p.run(10*time.Minute, []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath", "-buildvcs=false", "-o", bin, "./cmd/sluice"); err != nil {
		t.Fatal(err)
	}
	binData, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := filepath.Abs(containerf)
	if err != nil {
		t.Fatal(err)
	}
	cfData, err := os.ReadFile(cf)
	if err != nil {
		t.Fatal(err)
	}
	image = contentTag("localhost/sluice-compose-sluice", binData, cfData)
	if _, err := p.do("image", "exists", image); err == nil {
		return image, false
	}
	if _, err := p.do("build", "--quiet", "-f", cf, "-t", image, dir); err != nil {
		containersCannotRun(t, err.Error())
	}
	return image, true
}

// project is one run of the compose file under its own project name.
type project struct {
	*podman
	name string
	env  []string // the override's variables
	// volumes are the volumes the project's containers mounted, recorded
	// before down: the Redis containers' anonymous /data volumes carry no
	// project label, so only this list finds them afterwards.
	volumes []string
	downed  bool
}

// compose runs podman-compose on the compose file and the override.
func (c *project) compose(timeout time.Duration, args ...string) (string, error) {
	full := append([]string{"-p", c.name, "-f", composeFile, "-f", overrideFile}, args...)
	return c.run(timeout, c.env, "podman-compose", full...)
}

// psEntry is what `podman ps --format json` says of one container.
type psEntry struct {
	ID     string            `json:"Id"`
	Names  []string          `json:"Names"`
	State  string            `json:"State"`
	Labels map[string]string `json:"Labels"`
}

// containers lists the project's containers, running or not.
func (c *project) containers() ([]psEntry, error) {
	out, err := c.do("ps", "-a", "--filter", "label="+projectLabel+"="+c.name, "--format", "json")
	if err != nil {
		return nil, err
	}
	var ps []psEntry
	if err := json.Unmarshal([]byte(out), &ps); err != nil {
		return nil, fmt.Errorf("podman ps --format json: %v\n%s", err, out)
	}
	return ps, nil
}

// byService maps each service of the project to its container's name.
func (c *project) byService() (map[string]string, error) {
	ps, err := c.containers()
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, e := range ps {
		if len(e.Names) > 0 {
			m[e.Labels[serviceLabel]] = e.Names[0]
		}
	}
	return m, nil
}

// recordVolumes adds the volumes mounted by the project's containers to
// c.volumes.
func (c *project) recordVolumes() error {
	ps, err := c.containers()
	if err != nil || len(ps) == 0 {
		return err
	}
	args := []string{"inspect", "--format", `{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}`}
	for _, e := range ps {
		args = append(args, e.ID)
	}
	out, err := c.do(args...)
	if err != nil {
		return err
	}
	for _, v := range strings.Fields(out) {
		if !slices.Contains(c.volumes, v) {
			c.volumes = append(c.volumes, v)
		}
	}
	return nil
}

// leftovers lists what of the project still exists: containers and
// networks by label, volumes by label and from c.volumes.
func (c *project) leftovers() (containers, networks, volumes []string, err error) {
	ps, err := c.containers()
	if err != nil {
		return nil, nil, nil, err
	}
	for _, e := range ps {
		containers = append(containers, strings.Join(e.Names, ","))
	}
	filter := "label=" + projectLabel + "=" + c.name
	out, err := c.do("network", "ls", "--filter", filter, "--format", "{{.Name}}")
	if err != nil {
		return nil, nil, nil, err
	}
	networks = strings.Fields(out)
	out, err = c.do("volume", "ls", "--filter", filter, "--format", "{{.Name}}")
	if err != nil {
		return nil, nil, nil, err
	}
	volumes = strings.Fields(out)
	for _, v := range c.volumes {
		if _, err := c.do("volume", "exists", v); err == nil && !slices.Contains(volumes, v) {
			volumes = append(volumes, v)
		}
	}
	return containers, networks, volumes, nil
}

// down takes the project down: `podman-compose down -v`, then what that
// leaves behind. podman-compose 1.0.3 removes the containers and the
// labelled volumes but never the network it created, nor the anonymous
// volumes of images that declare a VOLUME (redis's /data); those are
// removed here by name, and said so. It is safe to call twice.
func (c *project) down(t *testing.T) {
	t.Helper()
	if c.downed {
		return
	}
	c.downed = true
	if err := c.recordVolumes(); err != nil {
		t.Errorf("down: listing the project's volumes: %v", err)
	}
	if _, err := c.compose(3*time.Minute, "down", "-v"); err != nil {
		t.Errorf("down: %v", err)
	}
	containers, networks, volumes, err := c.leftovers()
	if err != nil {
		t.Errorf("down: %v", err)
		return
	}
	if len(containers)+len(networks)+len(volumes) > 0 {
		t.Logf("podman-compose down -v left %d containers %q, %d networks %q and %d volumes; removing them", len(containers), containers, len(networks), networks, len(volumes))
	}
	for _, name := range containers {
		if _, err := c.do("rm", "-f", "-v", name); err != nil {
			t.Errorf("down: %v", err)
		}
	}
	for _, n := range networks {
		if _, err := c.do("network", "rm", n); err != nil {
			t.Errorf("down: %v", err)
		}
	}
	if len(volumes) > 0 {
		if _, err := c.do(append([]string{"volume", "rm"}, volumes...)...); err != nil {
			t.Errorf("down: %v", err)
		}
	}
}

// freeze stops a container's processes without closing its sockets, as
// the lab's `docker pause`: podman pause (the cgroup freezer), or, where
// that fails, SIGSTOP. It returns how, and the matching thaw.
func (c *project) freeze(t *testing.T, name string) (how string, thaw func() error) {
	t.Helper()
	if _, err := c.do("pause", name); err == nil {
		return "podman pause", func() error { _, err := c.do("unpause", name); return err }
	} else {
		t.Logf("podman pause did not work here, falling back to SIGSTOP: %v", err)
	}
	if _, err := c.do("kill", "--signal", "SIGSTOP", name); err != nil {
		t.Fatalf("cannot freeze %s: %v", name, err)
	}
	return "podman kill --signal SIGSTOP", func() error { _, err := c.do("kill", "--signal", "SIGCONT", name); return err }
}

// redisCLI runs redis-cli inside a Redis container, against its own port.
func (c *project) redisCLI(container, port string, args ...string) (string, error) {
	return c.do(append([]string{"exec", container, "redis-cli", "-p", port}, args...)...)
}

// uniqueName is a compose project name of its own for this run.
func uniqueName() string {
	return "sluicecompose" + strconv.FormatInt(time.Now().UnixNano(), 36) + strconv.Itoa(os.Getpid())
}
