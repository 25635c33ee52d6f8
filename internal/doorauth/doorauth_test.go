package doorauth

import (
	"encoding/base64"
	"testing"

	"github.com/sluice-rl/sluice/internal/acl"
)

func basicHeader(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }

func TestAuthenticate(t *testing.T) {
	withFile, err := acl.Parse("t.acl", []byte("user default on >dpw:x ~* +@all\nuser acme on >secret ~acme:* +@limit\nuser dpw on >x ~* +@limit\n"))
	if err != nil {
		t.Fatal(err)
	}
	closed, err := acl.Parse("t.acl", []byte("user acme on >secret ~acme:* +@limit\n"))
	if err != nil {
		t.Fatal(err)
	}
	open := acl.FromFlags("", "")
	cases := []struct {
		name   string
		l      *acl.List
		values []string
		user   string // "" for none
		given  bool
		failed bool
		logged string // Auth.Name
	}{
		{"none, default needs a password", withFile, nil, "", false, false, ""},
		{"none, default off", closed, nil, "", false, false, ""},
		{"none, default nopass", open, nil, "default", false, false, ""},
		{"a token both default's password and dpw:x: the named user wins", withFile, []string{"Bearer dpw:x"}, "dpw", true, false, ""},
		{"bearer user:pass", withFile, []string{"Bearer acme:secret"}, "acme", true, false, ""},
		{"bearer user:wrong", withFile, []string{"Bearer acme:nope"}, "", true, true, "acme"},
		{"bearer no such user: a password, not a name", withFile, []string{"Bearer ghost:nope"}, "", true, true, "default"},
		{"bearer, scheme in any case, spaces", withFile, []string{"  bEaReR   acme:secret  "}, "acme", true, false, ""},
		{"basic", withFile, []string{basicHeader("acme:secret")}, "acme", true, false, ""},
		{"basic without padding", withFile, []string{"Basic " + base64.RawStdEncoding.EncodeToString([]byte("acme:secret"))}, "acme", true, false, ""},
		{"basic empty user is default", withFile, []string{basicHeader(":dpw:x")}, "default", true, false, ""},
		{"basic wrong", withFile, []string{basicHeader("acme:nope")}, "", true, true, "acme"},
		{"basic no colon", withFile, []string{basicHeader("acme")}, "", true, true, ""},
		{"basic bad base64", withFile, []string{"Basic !!"}, "", true, true, ""},
		{"other scheme is no credentials", open, []string{"Negotiate xyz"}, "default", false, false, ""},
		{"other scheme, default needs a password", withFile, []string{"Digest x"}, "", false, false, ""},
		{"the first that authenticates", withFile, []string{"Bearer acme:nope", "Bearer acme:secret"}, "acme", true, false, ""},
		{"a failed one, with a nopass default, runs as it (and is logged)", open, []string{basicHeader("acme:x")}, "default", true, true, "acme"},
		{"bearer with nopass default: any token", open, []string{"Bearer whatever"}, "default", true, false, ""},
		{"basic off user", closed, []string{basicHeader("default:")}, "", true, true, "default"},
	}
	for _, c := range cases {
		a := Authenticate(c.l, c.values)
		got := ""
		if a.User != nil {
			got = a.User.Name()
		}
		if got != c.user || a.Given != c.given || a.Failed != c.failed || a.Name != c.logged {
			t.Errorf("%s: user %q given %v failed %v name %q, want %q %v %v %q", c.name, got, a.Given, a.Failed, a.Name, c.user, c.given, c.failed, c.logged)
		}
	}
}
