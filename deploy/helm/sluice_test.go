package helm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// repoRoot is the repository, from this package's directory.
const repoRoot = "../.."

// buildSluice builds ./cmd/sluice of this repository once for the whole
// run, into a directory TestMain removes.
var buildSluice = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "sluice-chart-test-")
	if err != nil {
		return "", err
	}
	buildDir = dir
	bin := filepath.Join(dir, "sluice")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/sluice")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/sluice: %v\n%s", err, out)
	}
	return bin, nil
})

// buildDir is where buildSluice put the binary, "" before.
var buildDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// sluiceBin is the binary built from this repository.
func sluiceBin(t *testing.T) string {
	t.Helper()
	bin, err := buildSluice()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// serveFlags are the flags `sluice serve --help` lists: true for a
// boolean one (given alone, or =true / =false), false for one that takes
// a value.
func serveFlags(t *testing.T) map[string]bool {
	t.Helper()
	cmd := exec.Command(sluiceBin(t), "serve", "--help")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("sluice serve --help: %v\n%s", err, out.String())
	}
	flags, err := parseFlagHelp(out.String())
	if err != nil {
		t.Fatalf("sluice serve --help: %v\n%s", err, out.String())
	}
	return flags
}

// flagLine is a flag's line in Go's flag.PrintDefaults: "  -name" for a
// boolean, "  -name type" for the others (the usage is on the next line,
// or after the type for a one-letter name).
var flagLine = regexp.MustCompile(`^  -([a-z0-9][a-z0-9-]*)(?: ([a-z]+))?(?:\t|$)`)

// parseFlagHelp reads the flags of a flag.PrintDefaults text.
func parseFlagHelp(help string) (map[string]bool, error) {
	flags := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(help))
	for sc.Scan() {
		if m := flagLine.FindStringSubmatch(sc.Text()); m != nil {
			flags[m[1]] = m[2] == ""
		}
	}
	// docs/flags.md lists over 50: a handful means the format changed
	// under this parser.
	if len(flags) < 20 {
		return nil, fmt.Errorf("only %d flags found in the help", len(flags))
	}
	return flags, nil
}

// serveArgsErrors checks container args against the flags of `sluice
// serve`: `serve` first, then only --name=value (or a boolean's --name),
// each name one the binary lists, none twice (the flag package would
// take the last silently, so an extraArgs --listen would hide the chart's).
func serveArgsErrors(args []string, flags map[string]bool) []error {
	if len(args) == 0 || args[0] != "serve" {
		return []error{fmt.Errorf("args %q: want the serve command first", args)}
	}
	var errs []error
	seen := map[string]bool{}
	for _, a := range args[1:] {
		spec, ok := strings.CutPrefix(a, "--")
		if !ok {
			errs = append(errs, fmt.Errorf("%q: not a --flag (a value must follow its flag's '=')", a))
			continue
		}
		name, value, hasValue := strings.Cut(spec, "=")
		isBool, known := flags[name]
		switch {
		case !known:
			errs = append(errs, fmt.Errorf("%q: sluice serve has no flag --%s", a, name))
		case seen[name]:
			errs = append(errs, fmt.Errorf("%q: --%s given twice", a, name))
		case isBool && hasValue:
			if _, err := strconv.ParseBool(value); err != nil {
				errs = append(errs, fmt.Errorf("%q: --%s is boolean, %q is not true or false", a, name, value))
			}
		case !isBool && !hasValue:
			errs = append(errs, fmt.Errorf("%q: --%s takes a value, as --%s=VALUE", a, name, name))
		}
		seen[name] = true
	}
	return errs
}

// Every flag in the rendered args is one `sluice serve` of this
// repository takes, in the form it takes it.
func TestChartArgsAreSluiceFlags(t *testing.T) {
	t.Parallel()
	flags := serveFlags(t)
	for _, tc := range valuesCases {
		t.Run(tc.name, func(t *testing.T) {
			c := container(t, render(t, readValues(t, tc.values)).deployment(t))
			for _, err := range serveArgsErrors(c.Args, flags) {
				t.Error(err)
			}
		})
	}
}

// The flag check refuses what sluice would: each of these args, in a
// container, would stop sluice at start or not do what it says.
func TestServeArgsErrorsRefuse(t *testing.T) {
	t.Parallel()
	flags := serveFlags(t)
	for _, tc := range []struct {
		args []string
		want []string // one per error, in order
	}{
		{[]string{"--listen=:6380"}, []string{"want the serve command first"}},
		{[]string{"serve", "--requirepass-fil=/x"}, []string{"sluice serve has no flag --requirepass-fil"}},
		{[]string{"serve", "--listen=:1", "--listen=:2"}, []string{"--listen given twice"}},
		{[]string{"serve", "--store-tls=yes please"}, []string{"is not true or false"}},
		{[]string{"serve", "--cluster"}, []string{"--cluster takes a value"}},
		{[]string{"serve", "--cluster", "redis:6379"}, []string{"--cluster takes a value", `"redis:6379": not a --flag`}},
		{[]string{"serve", "-listen=:6380"}, []string{"not a --flag"}},
	} {
		errs := serveArgsErrors(tc.args, flags)
		ok := len(errs) == len(tc.want)
		for i := 0; ok && i < len(errs); i++ {
			ok = strings.Contains(errs[i].Error(), tc.want[i])
		}
		if !ok {
			t.Errorf("serveArgsErrors(%q) = %v, want errors with %q", tc.args, errs, tc.want)
		}
	}
	if errs := serveArgsErrors([]string{"serve", "--store-tls", "--store-tls-ca-file=/ca.pem", "--grpc-ratelimit-headers=false"}, flags); len(errs) > 0 {
		t.Errorf("good args refused: %v", errs)
	}
}

// The policies and the aclfile the chart mounts pass `sluice check`: the
// ConfigMap's sluice.yaml at every values file (the default policies
// included), and the full values' users.acl.
func TestChartFilesPassSluiceCheck(t *testing.T) {
	t.Parallel()
	bin := sluiceBin(t)
	for _, tc := range valuesCases {
		t.Run(tc.name, func(t *testing.T) {
			o := render(t, readValues(t, tc.values))
			if len(o.configMaps) == 0 {
				return // the built-in policy: nothing to check
			}
			dir := t.TempDir()
			args := []string{"check"}
			for _, cm := range o.configMaps {
				f := filepath.Join(dir, "sluice.yaml")
				if err := os.WriteFile(f, []byte(cm.Data["sluice.yaml"]), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config="+f)
			}
			for _, s := range o.secrets {
				if acl, ok := s.Data["users.acl"]; ok {
					f := filepath.Join(dir, "users.acl")
					if err := os.WriteFile(f, acl, 0o600); err != nil {
						t.Fatal(err)
					}
					args = append(args, "--aclfile="+f)
				}
			}
			out, err := sluiceCheck(bin, args...)
			if err != nil {
				t.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			t.Logf("sluice check: %s", out)
			if len(o.configMaps) != 1 || !strings.Contains(out, "sluice.yaml: ok,") {
				t.Errorf("%d ConfigMaps checked: %s", len(o.configMaps), out)
			}
		})
	}
}

// sluiceCheck runs `sluice check` and returns what it printed.
func sluiceCheck(bin string, args ...string) (string, error) {
	out, err := exec.Command(bin, args...).CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return "", err
	}
	return strings.TrimSpace(string(out)), err
}

// sluice check sees a bad policy file that the chart renders: policies
// without on_store_error fail, naming the field.
func TestChartBadPoliciesFailSluiceCheck(t *testing.T) {
	t.Parallel()
	bin := sluiceBin(t)
	o := render(t, readValues(t, `
config:
  policies: |
    policies:
      - name: api
        match: "*"
        limit: 10
        rate: 10
        period: 1s
`))
	f := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(f, []byte(o.configMaps["rl-sluice"].Data["sluice.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := sluiceCheck(bin, "check", "--config="+f)
	if err == nil || !strings.Contains(out, "on_store_error") {
		t.Errorf("sluice check of policies without on_store_error: %v, %s; want an error naming on_store_error", err, out)
	}
	t.Logf("sluice check: %s", out)
}
