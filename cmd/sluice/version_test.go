package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/internal/redistest"
)

// settings is a build info with the main module at mod and the given
// build settings, as pairs.
func settings(mod string, kv ...string) *debug.BuildInfo {
	info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/sluice-rl/sluice", Version: mod}}
	for i := 0; i+1 < len(kv); i += 2 {
		info.Settings = append(info.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
	}
	return info
}

func TestBuildString(t *testing.T) {
	t.Parallel()
	const rev = "6bb2e53c0ffee0123456789abcdef0123456789a"
	cases := []struct {
		name    string
		stamped stamp
		info    *debug.BuildInfo
		want    string
	}{
		{"release: -X main.version wins over the module version", stamp{version: "0.1.0"},
			settings("v0.0.0-20261202000000-6bb2e53c0ffe", "vcs.revision", rev, "vcs.modified", "false"),
			"sluice 0.1.0 (commit 6bb2e53, go1.26.8 linux/amd64)"},
		{"release from a dirty tree", stamp{version: "0.1.0-3-g6bb2e53-dirty"},
			settings(devel, "vcs.revision", rev, "vcs.modified", "true"),
			"sluice 0.1.0-3-g6bb2e53-dirty (commit 6bb2e53, dirty, go1.26.8 linux/amd64)"},
		{"release from a git worktree: no vcs.* in the build info, the stamp's commit", stamp{"0.1.0", rev, "2026-12-02T00:00:00Z", "true"},
			settings(devel),
			"sluice 0.1.0 (commit 6bb2e53, dirty, go1.26.8 linux/amd64)"},
		{"the build info's commit and dirty flag win over a stamp's", stamp{"0.1.0", "ffffffffffff", "", "true"},
			settings(devel, "vcs.revision", rev, "vcs.modified", "false"),
			"sluice 0.1.0 (commit 6bb2e53, go1.26.8 linux/amd64)"},
		{"go install …@v0.1.0: the module version, no checkout", stamp{},
			settings("v0.1.0"),
			"sluice v0.1.0 (go1.26.8 linux/amd64)"},
		{"a checkout with changes: Go's pseudo-version", stamp{},
			settings("v0.0.0-20261202000000-6bb2e53c0ffe+dirty", "vcs.revision", rev, "vcs.time", "2026-12-02T00:00:00Z", "vcs.modified", "true"),
			"sluice v0.0.0-20261202000000-6bb2e53c0ffe+dirty (commit 6bb2e53, dirty, go1.26.8 linux/amd64)"},
		{"built with -buildvcs=false", stamp{}, settings(devel), "sluice (devel) (go1.26.8 linux/amd64)"},
		{"no build info at all", stamp{}, nil, "sluice (devel) (" + runtime.Version() + " linux/amd64)"},
		{"a short revision is kept whole", stamp{}, settings(devel, "vcs.revision", "abc"), "sluice (devel) (commit abc, go1.26.8 linux/amd64)"},
		{"vcs.modified other than true is clean", stamp{}, settings(devel, "vcs.revision", rev, "vcs.modified", "yes"), "sluice (devel) (commit 6bb2e53, go1.26.8 linux/amd64)"},
	}
	for _, c := range cases {
		if got := buildOf(c.stamped, c.info, "linux/amd64").String(); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

func TestBuildLong(t *testing.T) {
	t.Parallel()
	b := buildOf(stamp{}, settings("v0.1.0", "vcs.revision", "6bb2e53c0ffee", "vcs.time", "2026-12-02T00:00:00Z", "vcs.modified", "true"), "darwin/arm64")
	want := "version:  v0.1.0\nmodule:   v0.1.0\ncommit:   6bb2e53c0ffee\ntime:     2026-12-02T00:00:00Z\nmodified: true\ngo:       go1.26.8\nplatform: darwin/arm64\n"
	if got := b.long(); got != want {
		t.Errorf("long:\n%s\nwant:\n%s", got, want)
	}
}

// `sluice version`, `--version` and `-v` print the same line; an argument
// is an error, not ignored.
func TestVersionCommand(t *testing.T) {
	t.Parallel()
	want := readBuild().String() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}, {"-v"}} {
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), args, &stdout, &stderr); err != nil || stdout.String() != want {
			t.Errorf("sluice %v = %q, %v; want %q", args, stdout.String(), err, want)
		}
	}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"version", "extra"}, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), `unexpected argument "extra"`) {
		t.Errorf("sluice version extra: %v", err)
	}
	stdout.Reset()
	if err := run(context.Background(), []string{"-v", "-v"}, &stdout, &stderr); err != nil || !strings.HasPrefix(stdout.String(), "version:  ") {
		t.Errorf("sluice -v -v = %q, %v; want the long form", stdout.String(), err)
	}
}

// git runs git in dir and returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// The binary names the commit it was built from, and says dirty exactly
// when `git status --porcelain` lists a change, from the build info Go
// stamps; the test gives nothing but -ldflags in the first build. Go
// stamps only a checkout whose .git is a directory (a git worktree's .git
// file is not recognised), so the test builds in a clone of HEAD in a
// temporary directory with the tree's uncommitted changes copied over: the
// code under test is the tree's, and the tree itself is never touched.
// Then the clone is turned to the other state (its changes committed, or a
// change made) and built again, so both answers are seen on every run.
func TestVersionFromBuildInfo(t *testing.T) {
	redistest.SkipShort(t, "a clone of the tree and two builds of sluice from it (minutes)")
	requireTool(t, "git")
	top := git(t, ".", "rev-parse", "--show-toplevel")
	dir := filepath.Join(t.TempDir(), "src")
	git(t, ".", "clone", "--quiet", "--shared", top, dir)
	if got, want := git(t, dir, "rev-parse", "HEAD"), git(t, top, "rev-parse", "HEAD"); got != want {
		t.Fatalf("the clone is at %s, the tree at %s", got, want)
	}
	changed := strings.Fields(git(t, top, "diff", "--name-only", "HEAD") + "\n" + git(t, top, "ls-files", "--others", "--exclude-standard"))
	for _, name := range changed {
		b, err := os.ReadFile(filepath.Join(top, name))
		switch {
		case os.IsNotExist(err):
			err = os.Remove(filepath.Join(dir, name))
		case err == nil:
			if err = os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err == nil {
				err = os.WriteFile(filepath.Join(dir, name), b, 0o644)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	treeDirty := git(t, top, "status", "--porcelain") != ""
	if cloneDirty := git(t, dir, "status", "--porcelain") != ""; cloneDirty != treeDirty {
		t.Fatalf("the clone is dirty %t, the tree %t", cloneDirty, treeDirty)
	}
	platform := runtime.GOOS + "/" + runtime.GOARCH

	build := func(extra ...string) (line, long string) {
		t.Helper()
		bin := filepath.Join(t.TempDir(), "sluice")
		// -buildvcs=true: on a command line it wins over a GOFLAGS of
		// -buildvcs=false, as these machines' go env has. No -trimpath, so
		// the dependencies come from TestMain's build cache.
		cmd := exec.Command("go", append(append([]string{"build", "-buildvcs=true", "-o", bin}, extra...), "./cmd/sluice")...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		l, err := exec.Command(bin, "version").Output()
		if err != nil {
			t.Fatalf("sluice version: %v", err)
		}
		v, err := exec.Command(bin, "version", "-v").Output()
		if err != nil {
			t.Fatalf("sluice version -v: %v", err)
		}
		return strings.TrimSuffix(string(l), "\n"), string(v)
	}
	field := func(long, name string) string {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + name + `: +(.*)$`).FindStringSubmatch(long)
		if m == nil {
			t.Fatalf("sluice version -v has no %s:\n%s", name, long)
		}
		return m[1]
	}
	want := func(version, rev string, dirty bool) string {
		flag := ""
		if dirty {
			flag = "dirty, "
		}
		return "sluice " + version + " (commit " + rev[:7] + ", " + flag + runtime.Version() + " " + platform + ")"
	}

	// The tree as it is: HEAD's commit, dirty as git status says.
	head := git(t, top, "rev-parse", "HEAD")
	line, long := build("-ldflags", "-X main.version=9.9.9-test")
	if w := want("9.9.9-test", head, treeDirty); line != w {
		t.Errorf("the tree (git status dirty: %t), -X main.version:\n got %s\nwant %s", treeDirty, line, w)
	}
	if field(long, "commit") != head || field(long, "modified") != strconv.FormatBool(treeDirty) || field(long, "time") == "unknown" {
		t.Errorf("the tree, sluice version -v:\n%s\nwant commit %s, modified %t, a commit time", long, head, treeDirty)
	}

	// The other state, without -ldflags: the module version Go recorded.
	if treeDirty {
		git(t, dir, "add", "-A")
		git(t, dir, "-c", "user.name=test", "-c", "user.email=test@example.invalid", "commit", "--quiet", "-m", "the tree's changes")
	} else {
		readme := filepath.Join(dir, "README.md")
		b, err := os.ReadFile(readme)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(readme, append(b, "\nA change not committed.\n"...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dirty := git(t, dir, "status", "--porcelain") != ""
	if dirty == treeDirty {
		t.Fatalf("the clone is still dirty %t", dirty)
	}
	head = git(t, dir, "rev-parse", "HEAD")
	line, long = build()
	module := field(long, "module")
	if w := want(module, head, dirty); line != w || module == devel {
		t.Errorf("the clone (git status dirty: %t):\n got %s\nwant %s, a module version", dirty, line, w)
	}
	if field(long, "commit") != head || field(long, "modified") != strconv.FormatBool(dirty) || strings.HasSuffix(module, "+dirty") != dirty {
		t.Errorf("the clone, sluice version -v:\n%s\nwant commit %s, modified %t, +dirty on the module version iff dirty", long, head, dirty)
	}
}

// sluice_build_info and the start log carry the version `sluice version`
// prints: the package's binary, built by TestMain without -ldflags, so
// the version is the one read from the build info.
func TestServeReportsVersion(t *testing.T) {
	out, err := exec.Command(binary, "version").Output()
	m := regexp.MustCompile(`^sluice (\S+) \(`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("sluice version = %q, %v", out, err)
	}
	v := string(m[1])
	p, admin := startWithAdmin(t)
	series := `sluice_build_info{goversion="` + runtime.Version() + `",version="` + v + `"}`
	if got, ok := scrapeMetrics(t, admin)[series]; !ok || got != 1 {
		t.Errorf("/metrics: %s = %v (found %t), want 1", series, got, ok)
	}
	if !strings.Contains(p.Logs(), " version="+v) && !strings.Contains(p.Logs(), ` version="`+v+`"`) {
		t.Errorf("the start log does not name version %s:\n%s", v, p.Logs())
	}
}

// The line docs/operations.md shows is the one String writes for that build.
func TestOperationsShowsVersionLine(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?m)^\\$ sluice version\n(.*)$").FindSubmatch(raw)
	if m == nil {
		t.Fatal("docs/operations.md has no `$ sluice version` session")
	}
	b := buildOf(stamp{version: "v0.1.0"}, settings("v0.1.0", "vcs.revision", "6bb2e53c0ffee0123456789abcdef0123456789a", "vcs.modified", "false"), "linux/amd64")
	if got := string(m[1]); got != b.String() {
		t.Errorf("docs/operations.md shows\n%s\nsluice prints\n%s", got, b.String())
	}
}
