package app

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
