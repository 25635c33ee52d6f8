package policy

import (
	"cmp"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluice-rl/sluice/internal/yamlnode"
	"github.com/sluice-rl/sluice/limit"
)

// Set is a validated, ordered list of policies and the store deadline. It
// is immutable once built and safe for concurrent use. Build one with
// Parse, Load, Default or NewSet; a Set literal matches nothing.
type Set struct {
	// Timeout is the deadline of every store call, in (0, MaxTimeout].
	Timeout time.Duration
	// Policies in config order; the first that matches a key wins. Every
	// one passes Bucket. Do not modify them.
	Policies []*limit.Policy
	// Source is the file the set was read from, "built-in" for Default,
	// "" for NewSet.
	Source string

	rules []rule // Policies, compiled, same order
}

type rule struct {
	m matcher
	p *limit.Policy
}

// Match returns the first policy whose glob matches key, or nil when none
// does. It does not allocate; the fast paths ("*", "prefix*", "*suffix",
// "*infix*", a literal) cost a string comparison.
func (s *Set) Match(key string) *limit.Policy {
	if s == nil {
		return nil
	}
	// The switch of matcher.match, inlined: this loop runs for every
	// request, and a call per rule costs more than the comparison.
	for i := range s.rules {
		r := &s.rules[i]
		switch r.m.kind {
		case kindPrefix:
			if strings.HasPrefix(key, r.m.lit) {
				return r.p
			}
		case kindAll:
			return r.p
		case kindExact:
			if key == r.m.lit {
				return r.p
			}
		case kindSuffix:
			if strings.HasSuffix(key, r.m.lit) {
				return r.p
			}
		case kindContains:
			if strings.Contains(key, r.m.lit) {
				return r.p
			}
		default:
			if r.m.glob(key) {
				return r.p
			}
		}
	}
	return nil
}

// All returns the set's policies in config order (none for a nil set).
func (s *Set) All() []*limit.Policy {
	if s == nil {
		return nil
	}
	return s.Policies
}

// Lookup returns the policy called name, or nil.
func (s *Set) Lookup(name string) *limit.Policy {
	if s == nil {
		return nil
	}
	for _, p := range s.Policies {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Default returns the built-in set used when sluice runs with no config:
// one catch-all policy "default" of 100 tokens refilled at 50/s, deciding
// locally when the store is down, its hot keys served by lease from
// limit.DefaultHotThreshold requests/s on an instance (the default of a
// policy without a hot block).
func Default() *Set {
	s, err := NewSet(limit.DefaultTimeout, &limit.Policy{
		Name:         "default",
		Match:        "*",
		Algorithm:    limit.TokenBucket,
		Limit:        100,
		Rate:         50,
		Period:       time.Second,
		OnStoreError: limit.FailLocal,
		LocalShare:   1.0,
	})
	if err != nil {
		panic("policy: built-in default is invalid: " + err.Error())
	}
	s.Source = "built-in"
	return s
}

// Load reads and parses the config file at path; see Parse.
func Load(path string) (*Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot read config: " + strings.TrimPrefix(err.Error(), "open "+path+": ")}
	}
	return Parse(data, path)
}

// Parse reads a YAML config (docs/configuration.md, "The policy file"; the
// fields are yaml.go's topFields, policyFields and hotFields). It rejects
// unknown fields at every level and reports every problem it finds, in
// file order, as *Error values joined with errors.Join; file names the
// source in those messages. Unset fields take their value from defaults,
// then the built-in defaults: algorithm token_bucket, period 1s,
// local_share 1, and the hot block of limit.Policy.DefaultHot (lease where
// it applies, else off) for a policy whose hot mode is unset. Hot fields
// are inherited one by one; a lease or split without a threshold takes
// limit.DefaultHotThreshold. A null value (`limit: ~`) counts as unset.
func Parse(data []byte, file string) (*Set, error) {
	w := &walker{file: file}
	if len(data) > MaxConfigBytes {
		w.errorf(0, "", "", "the config is %d bytes, more than the %d allowed", len(data), MaxConfigBytes)
		return nil, w.errs.err()
	}
	root := w.document(data)
	if root == nil {
		return nil, w.errs.err()
	}
	timeout := time.Duration(0)
	var defaults *raw
	var policies []*raw
	var labels []string
	seenPolicies := false
	w.pairs(root, "", "", topFields, func(key string, v *yaml.Node) {
		switch key {
		case "timeout":
			timeout, _ = w.timeout(v)
		case "defaults":
			if v.Kind != yaml.MappingNode {
				w.errorf(v.Line, "defaults", "", "must be a mapping of policy fields, got %s", yamlnode.Describe(v))
				return
			}
			defaults = w.policy(v, "defaults")
		case "policies":
			seenPolicies = true
			if v.Kind != yaml.SequenceNode {
				w.errorf(v.Line, "", "policies", "must be a list of policies, got %s", yamlnode.Describe(v))
				return
			}
			for i, item := range v.Content {
				item = yamlnode.Deref(item)
				label := scopeOf(i+1, nameOf(item))
				if item.Kind != yaml.MappingNode {
					w.errorf(item.Line, label, "", "must be a mapping of policy fields, got %s", yamlnode.Describe(item))
					continue
				}
				policies = append(policies, w.policy(item, label))
				labels = append(labels, label)
			}
		}
	})
	if len(policies) == 0 && (!seenPolicies || len(w.errs) == 0) {
		w.errorf(root.Line, "", "policies", "at least one policy is required")
	}
	entries := make([]entry, len(policies))
	for i, r := range policies {
		p, skip := merge(defaults, r)
		entries[i] = entry{p: p, scope: labels[i], line: r.line, lines: r.lines, skip: skip}
	}
	s := build(&w.errs, file, timeout, entries)
	w.errs.sort()
	if err := w.errs.err(); err != nil {
		return nil, err
	}
	s.Source = file
	return s, nil
}

// NewSet builds a Set from policies built in code, in order, checking them
// as Parse does. A zero timeout means limit.DefaultTimeout. The Set holds copies
// of the policies, with the built-in defaults filled in as Parse does
// (algorithm token_bucket, period 1s, local_share 1, the hot block of
// limit.Policy.DefaultHot when Hot.Mode is empty, limit.DefaultHotThreshold
// for a lease or split without a threshold); the arguments are not
// modified.
func NewSet(timeout time.Duration, policies ...*limit.Policy) (*Set, error) {
	var errs errorList
	if msg := checkTimeout(timeout); msg != "" {
		errs.add(&Error{Field: "timeout", Msg: msg})
	}
	entries := make([]entry, 0, len(policies))
	for i, p := range policies {
		if p == nil {
			errs.add(&Error{Scope: scopeOf(i+1, ""), Msg: "is nil"})
			continue
		}
		q := *p
		entries = append(entries, entry{p: &q, scope: scopeOf(i+1, p.Name)})
	}
	s := build(&errs, "", timeout, entries)
	if err := errs.err(); err != nil {
		return nil, err
	}
	return s, nil
}

// entry is one policy on its way into a Set.
type entry struct {
	p     *limit.Policy
	scope string
	line  int             // of the policy; 0 when unknown
	lines map[string]int  // field → line where it was written
	skip  map[string]bool // fields already reported as invalid
}

func (e *entry) lineOf(field string) int {
	if l, ok := e.lines[field]; ok {
		return l
	}
	return e.line
}

// build checks every entry and the entries against each other (unique
// names, no policy hidden behind an earlier one) and compiles the Set. The
// Set is only meaningful when errs stayed empty.
func build(errs *errorList, file string, timeout time.Duration, entries []entry) *Set {
	if timeout == 0 {
		timeout = limit.DefaultTimeout
	}
	s := &Set{Timeout: timeout}
	names := map[string]int{}
	for i := range entries {
		e := &entries[i]
		report := func(field, msg string) {
			errs.add(&Error{File: file, Line: e.lineOf(field), Scope: e.scope, Field: field, Msg: msg})
		}
		prepareCalendar(e.p)
		check(e.p, e.skip, report)
		checkCalendar(e, report)
		normalizeCalendar(e.p)
		normalize(e.p)
		if j, dup := names[e.p.Name]; dup && e.p.Name != "" {
			report("name", fmt.Sprintf("%q is already the name of %s", e.p.Name, entries[j].where()))
		} else if e.p.Name != "" {
			names[e.p.Name] = i
		}
		m, msg := compileGlob(e.p.Match)
		if msg != "" {
			continue
		}
		for j := range s.rules {
			earlier := s.rules[j]
			if covers(&earlier.m, &m, earlier.p.Match, e.p.Match) {
				report("match", fmt.Sprintf("never used: %s, with match %q, comes first and matches every key that %q does",
					entryOf(entries, earlier.p).where(), earlier.p.Match, e.p.Match))
				break
			}
		}
		s.rules = append(s.rules, rule{m: m, p: e.p})
		s.Policies = append(s.Policies, e.p)
	}
	return s
}

func entryOf(entries []entry, p *limit.Policy) *entry {
	for i := range entries {
		if entries[i].p == p {
			return &entries[i]
		}
	}
	return &entry{}
}

// where names an entry in a message about another: policy #1 "api" (line 3).
func (e *entry) where() string {
	if e.line > 0 {
		return fmt.Sprintf("%s (line %d)", e.scope, e.line)
	}
	return e.scope
}

// normalize writes the built-in defaults into the unset optional fields.
func normalize(p *limit.Policy) {
	if p.Algorithm == "" {
		p.Algorithm = limit.TokenBucket
	}
	if p.Period == 0 {
		p.Period = DefaultPeriod
	}
	if p.LocalShare == 0 {
		p.LocalShare = 1
	}
	switch p.Hot.Mode {
	case "":
		p.Hot = p.DefaultHot()
	case limit.HotLease, limit.HotSplit:
		p.Hot.Threshold = cmp.Or(p.Hot.Threshold, limit.DefaultHotThreshold)
	}
}

// nameOf returns the name field of a policy mapping as written, for labels.
func nameOf(n *yaml.Node) string {
	if n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k, v := yamlnode.Deref(n.Content[i]), yamlnode.Deref(n.Content[i+1]); k.Value == "name" && v.Kind == yaml.ScalarNode {
			return v.Value
		}
	}
	return ""
}

// String renders the set for the start-up log: a header line, then one
// line per policy in match order, for example
//
//	sluice.yaml: 2 policies, first match wins, store timeout 50ms
//	  login match="login:*" token_bucket limit=5 rate=5/1m on_store_error=closed local_share=1 hot=off
func (s *Set) String() string {
	var b strings.Builder
	src := s.Source
	if src == "" {
		src = "policies"
	}
	fmt.Fprintf(&b, "%s: %d %s, first match wins, store timeout %s", src, len(s.Policies),
		plural(len(s.Policies), "policy", "policies"), formatDuration(s.Timeout))
	for _, p := range s.Policies {
		b.WriteString("\n  ")
		b.WriteString(Describe(p))
	}
	return b.String()
}

// Describe renders one policy on one line, in the format of String.
func Describe(p *limit.Policy) string {
	var b strings.Builder
	alg := p.Algorithm
	if alg == "" {
		alg = limit.TokenBucket
	}
	period := p.Period
	if period == 0 {
		period = DefaultPeriod
	}
	share := p.LocalShare
	if share == 0 {
		share = 1
	}
	if p.Calendar != "" {
		fmt.Fprintf(&b, "%s match=%q %s limit=%d/calendar %s timezone=%s", p.Name, p.Match, alg, p.Limit, p.Calendar, zoneName(p))
	} else if alg.IsBucket() {
		fmt.Fprintf(&b, "%s match=%q %s limit=%d rate=%d/%s", p.Name, p.Match, alg, p.Limit, p.Rate, formatDuration(period))
	} else {
		fmt.Fprintf(&b, "%s match=%q %s limit=%d/%s", p.Name, p.Match, alg, p.Limit, formatDuration(period))
	}
	if p.MaxTTL != 0 {
		fmt.Fprintf(&b, " max_ttl=%s", formatDuration(p.MaxTTL))
	}
	fmt.Fprintf(&b, " on_store_error=%s", p.OnStoreError)
	if p.OnOverload != "" {
		fmt.Fprintf(&b, " on_overload=%s", p.OnOverload)
	}
	fmt.Fprintf(&b, " local_share=%s", strconv.FormatFloat(share, 'g', -1, 64))
	if p.Shadow {
		b.WriteString(" shadow")
	}
	if p.NoDenyCache {
		b.WriteString(" deny_cache=false")
	}
	if p.Durable() {
		b.WriteString(" durability=replica")
	}
	if p.Global() {
		f := max(0, p.RegionFloor)
		if p.RegionFloor == 0 {
			f = limit.DefaultRegionFloor
		}
		fmt.Fprintf(&b, " scope=global region_floor=%s", strconv.FormatFloat(f, 'g', -1, 64))
	}
	b.WriteString(" hot=")
	b.WriteString(DescribeHot(p))
	return b.String()
}

// DescribeHot renders the hot block in force of p, as String shows it
// after "hot=": off, lease(threshold=500/s), split(threshold=500/s,k=8),
// the lease followed by " (default)" when the config named no hot mode.
func DescribeHot(p *limit.Policy) string {
	switch p.Hot.Mode {
	case limit.HotLease:
		s := fmt.Sprintf("lease(threshold=%d/s)", p.Hot.Threshold)
		if p.Hot.Default {
			s += " (default)"
		}
		return s
	case limit.HotSplit:
		return fmt.Sprintf("split(threshold=%d/s,k=%d)", p.Hot.Threshold, p.Hot.Split)
	}
	return "off"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
