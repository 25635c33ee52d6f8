package envoycfg

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The files of testdata/readme are the YAML examples of envoyproxy/ratelimit's
// README ("Configuration" > "Examples", commit f2fb157), copied verbatim,
// one file per YAML block. Each case below is what that README says of the
// example: which descriptor hits which limit.

// e builds descriptor entries from key, value pairs.
func e(kv ...string) []Entry {
	out := make([]Entry, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, Entry{kv[i], kv[i+1]})
	}
	return out
}

// want is what a descriptor should find: the rule's ID ("" for no rule),
// and for a limited rule its limit per period.
type want struct {
	id        string
	limit     int64
	period    time.Duration
	unlimited bool
	shadow    bool
}

func parseFile(t *testing.T, name string) *Config {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "readme", name))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(name, data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return c
}

func checkHit(t *testing.T, file, domain string, entries []Entry, h Hit, w want) {
	t.Helper()
	r := h.Rule
	switch {
	case w.id == "" && r != nil:
		t.Errorf("%s: %v matched %s, want no rule", file, entries, r.ID)
	case w.id == "":
	case r == nil:
		t.Errorf("%s: %v matched no rule, want %s", file, entries, w.id)
	case r.ID != w.id || r.Unlimited != w.unlimited:
		t.Errorf("%s: %v matched %s (unlimited %v), want %s (unlimited %v)", file, entries, r.ID, r.Unlimited, w.id, w.unlimited)
	case w.unlimited:
		if r.Policy != nil {
			t.Errorf("%s: %v: unlimited rule has a policy %+v", file, entries, r.Policy)
		}
	default:
		p := r.Policy
		if p.Name != w.id || p.Limit != w.limit || p.Period != w.period || p.Shadow != w.shadow || p.Algorithm != DefaultAlgorithm || p.OnStoreError != DefaultOnStoreError {
			t.Errorf("%s: %v: policy %+v, want %s %d per %s shadow %v fixed_window open", file, entries, *p, w.id, w.limit, w.period, w.shadow)
		}
	}
}

func TestReadmeExamples(t *testing.T) {
	const day = 24 * time.Hour
	tests := []struct {
		file, domain string
		entries      []Entry
		want         want
	}{
		// Example 1: two values of one key, 500/s each; other values unlimited.
		{"example01.yaml", "mongo_cps", e("database", "users"), want{id: "mongo_cps:database=users", limit: 500, period: time.Second}},
		{"example01.yaml", "mongo_cps", e("database", "default"), want{id: "mongo_cps:database=default", limit: 500, period: time.Second}},
		{"example01.yaml", "mongo_cps", e("database", "orders"), want{}},
		{"example01.yaml", "other", e("database", "users"), want{}},
		// Example 2: 5 marketing messages a day per number; 100 a day per number.
		{"example02.yaml", "messaging", e("message_type", "marketing", "to_number", "2061111111"), want{id: "messaging:message_type=marketing:to_number", limit: 5, period: day}},
		{"example02.yaml", "messaging", e("message_type", "marketing", "to_number", "2062222222"), want{id: "messaging:message_type=marketing:to_number", limit: 5, period: day}},
		{"example02.yaml", "messaging", e("to_number", "2061111111"), want{id: "messaging:to_number", limit: 100, period: day}},
		{"example02.yaml", "messaging", e("message_type", "marketing"), want{}}, // a placeholder, no limit
		{"example02.yaml", "messaging", e("message_type", "transactional", "to_number", "2061111111"), want{}},
		// Example 3: most specific first; 50.0.0.5 is blocked (0 per second).
		{"example03.yaml", "edge_proxy_per_ip", e("remote_address", "50.0.0.1"), want{id: "edge_proxy_per_ip:remote_address", limit: 10, period: time.Second}},
		{"example03.yaml", "edge_proxy_per_ip", e("remote_address", "50.0.0.5"), want{id: "edge_proxy_per_ip:remote_address=50.0.0.5", limit: 0, period: time.Second}},
		// Example 4: a rule matches only a descriptor of the same depth.
		{"example04a.yaml", "example4", e("key", "value", "subkey", "subvalue"), want{}},
		{"example04a.yaml", "example4", e("key", "value"), want{id: "example4:key=value", limit: 300, period: time.Second}},
		{"example04b.yaml", "example4", e("key", "value", "subkey", "subvalue"), want{id: "example4:key=value:subkey", limit: 300, period: time.Second}},
		{"example04b.yaml", "example4", e("key", "value"), want{}},
		// Example 5: unlimited.
		{"example05.yaml", "internal", e("ldap", "x"), want{id: "internal:ldap", unlimited: true}},
		{"example05.yaml", "internal", e("azure", "x"), want{id: "internal:azure", limit: 100, period: time.Minute}},
		// Example 6: user-a in shadow mode at 10/s, user-b limited at 20/s.
		{"example06.yaml", "example6", e("service", "auth-service", "user", "user-a"), want{id: "example6:service:user=user-a", limit: 10, period: time.Second, shadow: true}},
		{"example06.yaml", "example6", e("service", "auth-service", "user", "user-b"), want{id: "example6:service:user=user-b", limit: 20, period: time.Second}},
		{"example06.yaml", "example6", e("service", "auth-service", "user", "user-c"), want{}},
		// Example 7, one descriptor at a time (replaces: TestReadmeReplaces).
		{"example07.yaml", "example7", e("key_1", "value_1", "user", "bkthomps"), want{id: "example7:key_1=value_1:user=bkthomps", limit: 5, period: time.Second}},
		{"example07.yaml", "example7", e("key_2", "value_2", "user", "bkthomps"), want{id: "example7:key_2=value_2:user=bkthomps", limit: 10, period: time.Second}},
		// Example 8: detailed_metric changes metrics only. (The README's
		// prose says "/ sec"; its YAML, which is what counts, says minute.)
		{"example08.yaml", "example8", e("key1", "unspecified_value"), want{id: "example8:key1", limit: 10, period: time.Minute}},
		{"example08.yaml", "example8", e("key1", "unspecified_value2"), want{id: "example8:key1", limit: 10, period: time.Minute}},
		{"example08.yaml", "example8", e("key1", "value1"), want{id: "example8:key1=value1", limit: 20, period: time.Minute}},
		// Example 9: wildcards, trailing, in the middle, several.
		{"example09a.yaml", "example9", e("key1", "value1"), want{id: "example9:key1=value*", limit: 20, period: time.Minute}},
		{"example09a.yaml", "example9", e("key1", "valueXYZ"), want{id: "example9:key1=value*", limit: 20, period: time.Minute}},
		{"example09a.yaml", "example9", e("key1", "value"), want{id: "example9:key1=value*", limit: 20, period: time.Minute}},
		{"example09a.yaml", "example9", e("key1", "valu"), want{}},
		{"example09b.yaml", "example9", e("path", "/api/123/action"), want{id: "example9:path=/api/*/action", limit: 20, period: time.Minute}},
		{"example09b.yaml", "example9", e("path", "/api/user-id/action"), want{id: "example9:path=/api/*/action", limit: 20, period: time.Minute}},
		{"example09b.yaml", "example9", e("path", "/api/123/other"), want{}},
		{"example09c.yaml", "example9", e("route", "/api/v1/resource/123/action"), want{id: "example9:route=/api/*/resource/*/action", limit: 20, period: time.Minute}},
		{"example09c.yaml", "example9", e("route", "/api/v2/resource/456/action"), want{id: "example9:route=/api/*/resource/*/action", limit: 20, period: time.Minute}},
		{"example09c.yaml", "example9", e("route", "/api/v1/resource/123"), want{}},
		// Example 10: value_to_metric changes metrics only.
		{"example10a.yaml", "example10", e("route", "api", "http_method", "GET", "subject_id", "123"), want{id: "example10:route:http_method:subject_id", limit: 60, period: time.Minute}},
		{"example10a.yaml", "example10", e("route", "web", "http_method", "POST", "subject_id", "456"), want{id: "example10:route:http_method:subject_id", limit: 60, period: time.Minute}},
		{"example10b.yaml", "example10_wildcard", e("user", "alice", "action", "readfile", "resource", "documents"), want{id: "example10_wildcard:user:action=read*:resource", limit: 100, period: time.Minute}},
		{"example10b.yaml", "example10_wildcard", e("user", "alice", "action", "write", "resource", "documents"), want{}},
		// Example 11: share_threshold (the counters: TestReadmeShareThreshold).
		{"example11a.yaml", "example11", e("files", "files/a.pdf"), want{id: "example11:files=files/*", limit: 10, period: time.Hour}},
		{"example11a.yaml", "example11", e("files_no_share", "files_no_share/a.pdf"), want{id: "example11:files_no_share=files_no_share/*", limit: 10, period: time.Hour}},
		{"example11b.yaml", "example11_metrics", e("route", "api/v1", "method", "GET"), want{id: "example11_metrics:route=api/*:method", limit: 60, period: time.Minute}},
	}
	for _, tt := range tests {
		c := parseFile(t, tt.file)
		h := c.Lookup(tt.domain, tt.entries)
		checkHit(t, tt.file, tt.domain, tt.entries, h, tt.want)
		p, unlimited := c.Match(tt.domain, tt.entries)
		if h.Rule == nil && (p != nil || unlimited) || h.Rule != nil && (p != h.Rule.Policy || unlimited != h.Rule.Unlimited) {
			t.Errorf("%s: %v: Match = %v, %v; Lookup found %+v", tt.file, tt.entries, p, unlimited, h.Rule)
		}
		if h.Rule != nil && !h.Rule.Unlimited && h.Rule.Blocked() != (tt.want.limit == 0) {
			t.Errorf("%s: %v: Blocked() = %v", tt.file, tt.entries, h.Rule.Blocked())
		}
	}
}

// Each value of a key-only or wildcard rule has its own counter (Example 2:
// "each get 5 requests per day"), unless share_threshold (Example 11).
func TestReadmeCounters(t *testing.T) {
	tests := []struct {
		file, domain string
		a, b         []Entry
		shared       bool
	}{
		{"example02.yaml", "messaging", e("message_type", "marketing", "to_number", "2061111111"), e("message_type", "marketing", "to_number", "2062222222"), false},
		{"example02.yaml", "messaging", e("to_number", "2061111111"), e("message_type", "marketing", "to_number", "2061111111"), false},
		{"example09a.yaml", "example9", e("key1", "value1"), e("key1", "value2"), false},
		{"example11a.yaml", "example11", e("files", "files/a.pdf"), e("files", "files/b.csv"), true},
		{"example11a.yaml", "example11", e("files", "files/a.pdf"), e("files", "files/c.txt"), true},
		{"example11a.yaml", "example11", e("files_no_share", "files_no_share/a.pdf"), e("files_no_share", "files_no_share/b.csv"), false},
		{"example11b.yaml", "example11_metrics", e("route", "api/v1", "method", "GET"), e("route", "api/v2", "method", "GET"), true},
		{"example11b.yaml", "example11_metrics", e("route", "api/v1", "method", "GET"), e("route", "api/v1", "method", "POST"), false},
	}
	for _, tt := range tests {
		c := parseFile(t, tt.file)
		ha, hb := c.Lookup(tt.domain, tt.a), c.Lookup(tt.domain, tt.b)
		if ha.Rule == nil || hb.Rule == nil {
			t.Fatalf("%s: %v or %v matched no rule", tt.file, tt.a, tt.b)
		}
		if got := ha.Key == hb.Key; got != tt.shared {
			t.Errorf("%s: %v → %q, %v → %q: shared %v, want %v", tt.file, tt.a, ha.Key, tt.b, hb.Key, got, tt.shared)
		}
		if !strings.Contains(ha.Key, "*") && ha.Key != Key(tt.domain, tt.a) {
			t.Errorf("%s: %v: key %q, want Key() = %q", tt.file, tt.a, ha.Key, Key(tt.domain, tt.a))
		}
	}
	c := parseFile(t, "example11a.yaml")
	if got, want := c.Lookup("example11", e("files", "files/a.pdf")).Key, "example11:files=files/*"; got != want {
		t.Errorf("shared key %q, want %q", got, want)
	}
}

// Example 2 sends two descriptors in one request: both rules apply.
// Example 7: a request with both descriptors is limited by the replacing
// rule alone (10/s); the replaced one (5/s) is not counted.
func TestReadmeReplaces(t *testing.T) {
	c := parseFile(t, "example02.yaml")
	hits := c.LookupRequest("messaging", [][]Entry{e("message_type", "marketing", "to_number", "2061111111"), e("to_number", "2061111111")})
	if hits[0].Rule == nil || hits[0].Rule.Policy.Limit != 5 || hits[1].Rule == nil || hits[1].Rule.Policy.Limit != 100 {
		t.Errorf("example 2: %+v, want both the 5/day and the 100/day rules", hits)
	}

	c = parseFile(t, "example07.yaml")
	one := e("key_1", "value_1", "user", "bkthomps")
	two := e("key_2", "value_2", "user", "bkthomps")
	hits = c.LookupRequest("example7", [][]Entry{one, two})
	if !hits[0].Replaced || hits[0].Rule != nil || hits[0].Key != "" {
		t.Errorf("example 7: first descriptor %+v, want replaced", hits[0])
	}
	if r := hits[1].Rule; r == nil || r.Policy.Limit != 10 || hits[1].Replaced {
		t.Errorf("example 7: second descriptor %+v, want the 10/s rule", hits[1])
	}
	// Alone, or in the other order, each keeps its own rule or is replaced alike.
	if hits := c.LookupRequest("example7", [][]Entry{one}); hits[0].Rule == nil || hits[0].Rule.Policy.Limit != 5 {
		t.Errorf("example 7 alone: %+v, want 5/s", hits[0])
	}
	if hits := c.LookupRequest("example7", [][]Entry{two, one}); hits[1].Rule != nil || hits[0].Rule.Policy.Limit != 10 {
		t.Errorf("example 7 reversed: %+v", hits)
	}
}

// Loading the README's examples as one directory is refused: two of them
// reuse a domain (example4, example9), and ratelimit refuses that too.
func TestReadmeDirDuplicateDomains(t *testing.T) {
	_, err := LoadDir(filepath.Join("testdata", "readme"))
	if err == nil {
		t.Fatal("LoadDir(testdata/readme) = nil error, want duplicate domains")
	}
	for _, want := range []string{
		`example04b.yaml:3: domain: duplicate domain "example4": testdata/readme/example04a.yaml defines it too`,
		`example09b.yaml:3: domain: duplicate domain "example9"`,
		`example09c.yaml:3: domain: duplicate domain "example9"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\nwant it to contain %q", err, want)
		}
	}
}
