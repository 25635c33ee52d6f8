package envoycfg

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// Units are the rate_limit units of envoyproxy/ratelimit with their
// lengths. A month is 30 days and a year 365 days, as ratelimit counts them
// (its UnitToDivider), so a migrated limit keeps its window: a fixed
// window of one month restarts every 30 days from the Unix epoch, not on
// the first of the month.
var Units = map[string]time.Duration{
	"second": time.Second,
	"minute": time.Minute,
	"hour":   time.Hour,
	"day":    24 * time.Hour,
	"week":   7 * 24 * time.Hour,
	"month":  30 * 24 * time.Hour,
	"year":   365 * 24 * time.Hour,
}

// The defaults of the sluice fields an Envoy rule may add.
const (
	// DefaultAlgorithm is a rule's algorithm when it names none: the fixed
	// window ratelimit counts with today.
	DefaultAlgorithm = limit.FixedWindow
	// DefaultOnStoreError is a rule's failure policy when it names none:
	// open, as an envoyproxy/ratelimit user gets today behind Envoy's
	// default failure_mode_deny: false (a Redis outage admits).
	DefaultOnStoreError = limit.FailOpen
)

// Rule is one rate_limit block of the config: where it is and the sluice
// policy it became. Rules are immutable once loaded.
type Rule struct {
	// ID names the rule: the domain, then each key[=value] of the path
	// from the top, joined by ':' and escaped as Key escapes
	// (messaging:message_type=marketing:to_number). It is the policy's name.
	ID     string
	Domain string
	File   string // the file it was read from
	Path   string // its descriptor in the file, e.g. descriptors[0].descriptors[1]
	// Policy is the sluice policy: Name is the domain and the path of
	// key[=value] of the rule, Match is empty (Envoy rules are found by
	// descriptor, not by glob), Limit and Rate are requests_per_unit,
	// Period the unit. nil for an unlimited rule.
	//
	// Limit is 0 for requests_per_unit: 0, ratelimit's way to refuse
	// everything (Example 3's blocked address): no store can hold such a
	// bucket, so the caller answers over the limit without asking one.
	Policy    *limit.Policy
	Unlimited bool
	Unit      string   // as written, lower case; "" for an unlimited rule
	Name      string   // rate_limit.name, what other rules' replaces refer to
	Replaces  []string // rate_limit.replaces names
	// Quota is quota_mode: as in envoyproxy/ratelimit, a request is over
	// the limit for its quota rules only when every quota rule of it is;
	// each is decided apart (spent when it admits), never part of the
	// all-or-nothing group of the other rules.
	Quota bool
}

// Blocked reports whether the rule refuses every request
// (requests_per_unit: 0).
func (r *Rule) Blocked() bool { return r.Policy != nil && r.Policy.Limit == 0 }

// String is one line describing the rule, as printed at start.
func (r *Rule) String() string {
	var b strings.Builder
	b.WriteString(r.ID)
	switch {
	case r.Unlimited:
		b.WriteString(" unlimited")
	default:
		p := r.Policy
		fmt.Fprintf(&b, " %d per %s algorithm=%s on_store_error=%s", p.Limit, r.Unit, p.Algorithm, p.OnStoreError)
		if p.Shadow {
			b.WriteString(" shadow")
		}
		if p.Hot.Mode == limit.HotLease {
			fmt.Fprintf(&b, " hot=lease(threshold=%d/s)", p.Hot.Threshold)
		}
	}
	if r.Name != "" {
		fmt.Fprintf(&b, " name=%s", r.Name)
	}
	if len(r.Replaces) > 0 {
		fmt.Fprintf(&b, " replaces=%s", strings.Join(r.Replaces, ","))
	}
	fmt.Fprintf(&b, " (%s %s)", r.File, r.Path)
	return b.String()
}

// Config is a loaded envoyproxy/ratelimit configuration: every domain of
// a directory. It is immutable and safe for concurrent use.
type Config struct {
	domains map[string]level
	rules   []*Rule // in file order, then config order
}

// Rules returns the rules in the order they were read. The caller must not
// modify them.
func (c *Config) Rules() []*Rule {
	if c == nil {
		return nil
	}
	return c.rules
}

// Domains returns the domain names, sorted.
func (c *Config) Domains() []string {
	if c == nil {
		return nil
	}
	out := make([]string, 0, len(c.domains))
	for d := range c.domains {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// String lists the rules, one a line.
func (c *Config) String() string {
	var b strings.Builder
	for _, r := range c.Rules() {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// level is one descriptor list: its descriptors by key.
type level map[string]*keyed

// keyed holds the descriptors of one key on one level, in the order the
// walk tries them: an exact value, then the wildcard values in config
// order, then the key alone.
type keyed struct {
	exact map[string]*node
	wild  []*node
	any   *node
}

// node is one descriptor of the config.
type node struct {
	parts    []string // a wildcard value split on '*'; nil otherwise
	pattern  string   // the wildcard value as written
	share    bool     // share_threshold: every value matching pattern shares one counter
	rule     *Rule    // nil when the descriptor has no rate_limit
	children level
}

// wildcardMatch reports whether value matches the pattern split on '*':
// each '*' matches zero or more bytes.
func wildcardMatch(parts []string, value string) bool {
	first, last := parts[0], parts[len(parts)-1]
	if len(value) < len(first)+len(last) || !strings.HasPrefix(value, first) || !strings.HasSuffix(value, last) {
		return false
	}
	rest := value[len(first) : len(value)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}

// Hit is what one descriptor of a request found.
type Hit struct {
	// Rule is the rule that applies; nil when none matched, or when another
	// matched rule of the same request replaces it.
	Rule *Rule
	// Key is the sluice key of the descriptor's counter: Key(domain,
	// entries), except that a value matched by a share_threshold wildcard
	// is written as the wildcard (so every such value shares one counter).
	// "" when Rule is nil.
	Key string
	// Replaced reports that a rule matched but was replaced.
	Replaced bool
}

// Lookup walks the descriptor's entries down the domain's tree, as
// envoyproxy/ratelimit does: on each level the exact key and value first,
// else the first wildcard value that matches, else the key alone; the walk
// never backtracks. A rule applies when the walk uses every entry and ends
// on a descriptor with a rate_limit. Replaces needs the whole request: see
// LookupRequest.
func (c *Config) Lookup(domain string, entries []Entry) Hit {
	if c == nil || len(entries) == 0 {
		return Hit{}
	}
	lv := c.domains[domain]
	var n *node
	var shared []int // entries matched by a share_threshold wildcard
	var patterns []string
	for i, e := range entries {
		if lv == nil {
			return Hit{}
		}
		k := lv[e.Key]
		if k == nil {
			return Hit{}
		}
		n = k.exact[e.Value]
		if n == nil {
			for _, w := range k.wild {
				if wildcardMatch(w.parts, e.Value) {
					n = w
					if w.share {
						shared, patterns = append(shared, i), append(patterns, w.pattern)
					}
					break
				}
			}
		}
		if n == nil {
			n = k.any
		}
		if n == nil {
			return Hit{}
		}
		lv = n.children
	}
	if n.rule == nil {
		return Hit{}
	}
	if len(shared) == 0 {
		return Hit{Rule: n.rule, Key: Key(domain, entries)}
	}
	es := append([]Entry(nil), entries...)
	for j, i := range shared {
		es[i].Value = patterns[j]
	}
	return Hit{Rule: n.rule, Key: Key(domain, es)}
}

// LookupRequest looks up every descriptor of one request and applies
// replaces as envoyproxy/ratelimit does: the names in the replaces of every
// matched rule (an unlimited one included) are collected, and each matched
// rule whose name is among them does not apply (its Hit has Rule nil and
// Replaced true), as if it had not matched.
func (c *Config) LookupRequest(domain string, descriptors [][]Entry) []Hit {
	hits := make([]Hit, len(descriptors))
	var replacing map[string]bool
	for i, d := range descriptors {
		hits[i] = c.Lookup(domain, d)
		if r := hits[i].Rule; r != nil && len(r.Replaces) > 0 {
			if replacing == nil {
				replacing = map[string]bool{}
			}
			for _, name := range r.Replaces {
				replacing[name] = true
			}
		}
	}
	for i := range hits {
		if r := hits[i].Rule; r != nil && r.Name != "" && replacing[r.Name] {
			hits[i] = Hit{Replaced: true}
		}
	}
	return hits
}

// Match returns the policy of the rule the descriptor matches, or nil and
// true for an unlimited rule, or nil and false when no rule matches. The
// counter's key is Key(domain, entries) unless a share_threshold wildcard
// matched (Lookup gives the key in every case). Replaces needs the whole
// request: see LookupRequest. A policy with Limit 0 refuses everything
// (see Rule.Policy).
func (c *Config) Match(domain string, entries []Entry) (p *limit.Policy, unlimited bool) {
	h := c.Lookup(domain, entries)
	if h.Rule == nil {
		return nil, false
	}
	return h.Rule.Policy, h.Rule.Unlimited
}
