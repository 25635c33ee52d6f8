package app

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestACLFileFlag: --aclfile loads the users; beside --requirepass or
// --admin-pass, in any of their forms, it is an error naming both.
func TestACLFileFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "users.acl")
	bad := filepath.Join(dir, "bad.acl")
	pass := filepath.Join(dir, "pass")
	for path, text := range map[string]string{
		good: "user acme on >pw ~acme:* +@limit\n",
		bad:  "user acme on >pw\nuser beta on +rl.nope\n",
		pass: "pw\n",
	} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	tests := []struct {
		name   string
		args   []string
		getenv func(string) string
		want   string // "" no error
		users  string // ACL USERS when no error
	}{
		{"aclfile", []string{"--aclfile", good}, env(), "", "acme default"},
		{"flags", []string{"--requirepass", "x", "--admin-pass", "y"}, env(), "", "admin default"},
		{"none", nil, env(), "", "default"},
		{"with --requirepass", []string{"--aclfile", good, "--requirepass", "x"}, env(), "--aclfile and --requirepass", ""},
		{"with --requirepass-file", []string{"--aclfile", good, "--requirepass-file", pass}, env(), "--aclfile and --requirepass", ""},
		{"with SLUICE_REQUIREPASS", []string{"--aclfile", good}, env("SLUICE_REQUIREPASS", "x"), "SLUICE_REQUIREPASS", ""},
		{"with --admin-pass", []string{"--aclfile", good, "--admin-pass", "x"}, env(), "--aclfile and --admin-pass", ""},
		{"with SLUICE_ADMIN_PASS", []string{"--aclfile", good}, env("SLUICE_ADMIN_PASS", "x"), "SLUICE_ADMIN_PASS", ""},
		{"with --http and --grpc", []string{"--aclfile", good, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"}, env(), "", "acme default"}, // the doors take the same users
		{"with both", []string{"--aclfile", good, "--requirepass", "x", "--admin-pass", "y"}, env(), "--requirepass (or --requirepass-file, SLUICE_REQUIREPASS) and --admin-pass", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(tt.args, tt.getenv, io.Discard)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("Load(%v) = %v, want an error containing %q", tt.args, err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load(%v): %v", tt.args, err)
			}
			l, err := c.LoadUsers()
			if err != nil {
				t.Fatalf("LoadUsers: %v", err)
			}
			if got := strings.Join(l.Names(), " "); got != tt.users {
				t.Errorf("users = %q, want %q", got, tt.users)
			}
		})
	}
	c := Defaults()
	c.ACLFile = bad
	_, err := New(context.Background(), c)
	if err == nil || !strings.Contains(err.Error(), bad+":2: user 'beta': error in rule '+rl.nope'") {
		t.Errorf("New with a bad --aclfile: %v, want file:line and the rule", err)
	}
	c.ACLFile, c.RequirePass = good, "x"
	if _, err := New(context.Background(), c); err == nil || !strings.Contains(err.Error(), "--aclfile and --requirepass") {
		t.Errorf("New with --aclfile and RequirePass: %v", err)
	}
}
