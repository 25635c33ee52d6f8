package app

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/policy"
)

func TestSentinelFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	passFile := filepath.Join(dir, "sentinel-pass")
	if err := os.WriteFile(passFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string // "" means no error
	}{
		{[]string{"--sentinel", "mymaster"}, "no '@'"},
		{[]string{"--sentinel", "@127.0.0.1:26379"}, "empty master name"},
		{[]string{"--sentinel", "my master@127.0.0.1:26379"}, "space"},
		{[]string{"--sentinel", "m@127.0.0.1"}, "not host:port"},
		{[]string{"--sentinel", "m@:26379"}, "not host:port"},
		{[]string{"--sentinel", "m@127.0.0.1:0"}, "no port in 1..65535"},
		{[]string{"--sentinel", "m@127.0.0.1:http"}, "no port in 1..65535"},
		{[]string{"--sentinel", "m@127.0.0.1:26379,,127.0.0.1:26380"}, `"" is not host:port`},
		{[]string{"--sentinel", "m@127.0.0.1:26379", "--cluster", "127.0.0.1:7000"}, "exclusive"},
		{[]string{"--sentinel", "m@127.0.0.1:26379", "--redis", "redis://127.0.0.1:6379"}, "exclusive"},
		{[]string{"--sentinel-pass-file", passFile}, "need --sentinel"},
		{[]string{"--sentinel", "m@127.0.0.1:26379", "--sentinel-pass-file", filepath.Join(dir, "missing")}, "sentinel-pass-file"},
		{[]string{"--sentinel", "m@127.0.0.1:26379, [::1]:26380", "--sentinel-pass-file", passFile, "--sentinel-user", "watcher"}, ""},
	} {
		f, err := Load(tt.args, os.Getenv, io.Discard)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%q: %v", tt.args, err)
		case tt.want == "":
			if f.masterName != "m" || strings.Join(f.sentinelAddrs, " ") != "127.0.0.1:26379 [::1]:26380" ||
				f.SentinelPass != "s3cret" || f.SentinelUser != "watcher" {
				t.Errorf("%q: name %q, addrs %q, user %q, password read %v", tt.args, f.masterName, f.sentinelAddrs, f.SentinelUser, f.SentinelPass == "s3cret")
			}
		case err == nil || !strings.Contains(err.Error(), tt.want):
			t.Errorf("%q: error %v, want one saying %q", tt.args, err, tt.want)
		}
	}
}

// TestPrecedence: the one rule, for a value with a file form, a flag and
// an environment variable (--requirepass), one with a flag and a variable
// (--store-user), one with a file form and a variable only
// (--store-pass-file), and one with a flag and a --config field
// (--timeout): file, then flag, then environment, then --config, then the
// default.
func TestPrecedence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "pass")
	if err := os.WriteFile(file, []byte("from-file\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SLUICE_REQUIREPASS": "from-env", "SLUICE_STORE_USER": "env-user", "SLUICE_STORE_PASS": "env-pass"}
	getenv := func(k string) string { return env[k] }
	none := func(string) string { return "" }
	for _, tc := range []struct {
		args                 []string
		getenv               func(string) string
		pass, user, storePwd string
	}{
		{nil, none, "", "", ""},
		{nil, getenv, "from-env", "env-user", "env-pass"},
		{[]string{"--requirepass", "from-flag", "--store-user", "flag-user"}, getenv, "from-flag", "flag-user", "env-pass"},
		{[]string{"--requirepass", "", "--store-user", ""}, getenv, "from-env", "env-user", "env-pass"},
		{[]string{"--requirepass", "from-flag", "--requirepass-file", file, "--store-pass-file", file}, getenv, "from-file", "env-user", "from-file"},
		{[]string{"--requirepass-file", file}, none, "from-file", "", ""},
	} {
		c, err := Load(tc.args, tc.getenv, io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if c.RequirePass != tc.pass || c.Store.User != tc.user || c.Store.Pass != tc.storePwd {
			t.Errorf("%q: requirepass %q, store user %q, store password %q; want %q, %q, %q",
				tc.args, c.RequirePass, c.Store.User, c.Store.Pass, tc.pass, tc.user, tc.storePwd)
		}
	}

	yaml := &policy.Set{Timeout: 200 * time.Millisecond}
	for _, tc := range []struct {
		args []string
		set  *policy.Set
		want time.Duration
	}{
		{nil, &policy.Set{}, limit.DefaultTimeout},
		{nil, yaml, 200 * time.Millisecond},
		{[]string{"--timeout", "50ms"}, yaml, 50 * time.Millisecond}, // given, even at the default
		{[]string{"--timeout", "1s"}, &policy.Set{}, time.Second},
	} {
		c, err := Load(tc.args, none, io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if got := c.TimeoutIn(tc.set); got != tc.want {
			t.Errorf("%q with timeout: %v: %v, want %v", tc.args, tc.set.Timeout, got, tc.want)
		}
	}
	if _, err := Load([]string{"--requirepass-file", filepath.Join(dir, "none")}, none, io.Discard); err == nil || !strings.Contains(err.Error(), "serve: --requirepass-file: ") {
		t.Errorf("a missing --requirepass-file: %v", err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load([]string{"--requirepass", "x", "--requirepass-file", empty}, getenv, io.Discard); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("an empty --requirepass-file: %v, want an error", err)
	}
}

// TestDefaults: a Config from Defaults is what Load makes of no arguments.
func TestDefaults(t *testing.T) {
	t.Parallel()
	c, err := Load(nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if d := Defaults(); !reflect.DeepEqual(*c, d) {
		t.Errorf("Defaults() = %+v\nLoad(nil) = %+v", d, *c)
	}
}
