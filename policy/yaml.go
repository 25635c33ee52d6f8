package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluice-rl/sluice/internal/yamlnode"
	"github.com/sluice-rl/sluice/limit"
)

// The fields each mapping of the config may hold (docs/configuration.md,
// "The policy file", says what each means). Anything else is an error: yaml.v3's KnownFields does not
// apply to yaml.Node, so the walker below checks keys itself, which also
// lets every error carry its policy and line.
var (
	topFields    = []string{"timeout", "defaults", "policies"}
	policyFields = []string{"name", "match", "algorithm", "limit", "rate", "period", "on_store_error", "on_overload", "local_share", "shadow", "deny_cache", "hot", "scope", "region_floor", "calendar", "timezone", "max_ttl", "durability"}
	hotFields    = []string{"mode", "threshold", "split"}
)

// raw is a policy, or the defaults, as written. A field is set when it has
// an entry in apply, which writes the decoded value into a Policy; a field
// that was written but is invalid is in bad instead (and already reported).
type raw struct {
	line  int            // of the policy's first key
	lines map[string]int // field → line
	apply map[string]func(*limit.Policy)
	bad   map[string]bool
}

func newRaw(line int) *raw {
	return &raw{line: line, lines: map[string]int{}, apply: map[string]func(*limit.Policy){}, bad: map[string]bool{}}
}

// merge lays r over the defaults d. Fields that are bad in d and unset in r
// are skipped by check, so a bad default is reported once, not per policy.
func merge(d, r *raw) (*limit.Policy, map[string]bool) {
	p := &limit.Policy{}
	skip := map[string]bool{}
	own := func(f string) bool { _, ok := r.apply[f]; return ok || r.bad[f] }
	if d != nil {
		for f, set := range d.apply {
			if !own(f) && inheritsFromDefaults(d, r, f) {
				set(p)
			}
		}
		for f := range d.bad {
			if !own(f) && inheritsFromDefaults(d, r, f) {
				skip[f] = true
			}
		}
	}
	for _, set := range r.apply {
		set(p)
	}
	for f := range r.bad {
		skip[f] = true
	}
	return p, skip
}

// walker turns a YAML node tree into raw policies, collecting errors.
type walker struct {
	file string
	errs errorList
}

func (w *walker) errorf(line int, scope, field, format string, args ...any) {
	w.errs.add(&Error{File: w.file, Line: line, Scope: scope, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// document parses data into its top-level mapping node; nil after an error.
func (w *walker) document(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			w.errorf(0, "", "", "the config is empty: want timeout, defaults and policies")
		} else {
			w.syntax(err)
		}
		return nil
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		w.errorf(next.Line, "", "", "only one YAML document is allowed, found another")
		return nil
	} else if !errors.Is(err, io.EOF) {
		w.syntax(err)
		return nil
	}
	root := yamlnode.Deref(&doc)
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = yamlnode.Deref(root.Content[0])
	}
	if root.Kind != yaml.MappingNode {
		w.errorf(root.Line, "", "", "the config must be a mapping of timeout, defaults and policies, got %s", yamlnode.Describe(root))
		return nil
	}
	return root
}

// syntax reports a YAML syntax error, moving yaml.v3's "line N" to the front.
func (w *walker) syntax(err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.Index(rest, ": "); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				line, msg = n, rest[i+2:]
			}
		}
	}
	w.errorf(line, "", "", "invalid YAML: %s", msg)
}

// pairs calls f for each field of mapping n whose value is not null,
// reporting duplicate, unknown and non-string keys. prefix ("hot.") is
// prepended to field names in messages.
func (w *walker) pairs(n *yaml.Node, scope, prefix string, known []string, f func(key string, v *yaml.Node)) {
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := yamlnode.Deref(n.Content[i]), yamlnode.Deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			w.errorf(k.Line, scope, strings.TrimSuffix(prefix, "."), "field names must be strings, got %s", yamlnode.Describe(k))
			continue
		}
		key := k.Value
		if first, dup := seen[key]; dup {
			w.errorf(k.Line, scope, prefix+key, "set twice (first at line %d)", first)
			continue
		}
		seen[key] = k.Line
		if !slices.Contains(known, key) {
			msg := fmt.Sprintf("unknown field %q", key)
			switch s := yamlnode.Suggest(key, known); {
			case key == "<<":
				msg += " (YAML merge keys are not supported; use defaults)"
			case s != "":
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			default:
				msg += fmt.Sprintf(" (want one of %s)", strings.Join(known, ", "))
			}
			w.errorf(k.Line, scope, strings.TrimSuffix(prefix, "."), "%s", msg)
			continue
		}
		if v.ShortTag() == "!!null" {
			continue
		}
		f(key, v)
	}
}

// timeout decodes the top-level timeout; zero means limit.DefaultTimeout.
func (w *walker) timeout(v *yaml.Node) (time.Duration, bool) {
	d, msg := duration(v)
	if msg == "" {
		msg = checkTimeout(d)
	}
	if msg != "" {
		w.errorf(v.Line, "", "timeout", "%s", msg)
		return 0, false
	}
	return d, true
}

// policy decodes one policy mapping, or the defaults when scope is
// "defaults".
func (w *walker) policy(n *yaml.Node, scope string) *raw {
	r := newRaw(n.Line)
	if len(n.Content) > 0 {
		r.line = n.Content[0].Line
	}
	w.pairs(n, scope, "", policyFields, func(key string, v *yaml.Node) {
		switch {
		case scope == "defaults" && (key == "name" || key == "match"):
			w.errorf(v.Line, scope, key, "not allowed in defaults: every policy sets its own")
		case key == "hot" && v.Kind != yaml.MappingNode:
			w.errorf(v.Line, scope, key, "must be a mapping of mode, threshold and split, got %s", yamlnode.Describe(v))
			for _, f := range hotFields {
				r.bad["hot."+f] = true
			}
		case key == "hot":
			w.pairs(v, scope, "hot.", hotFields, func(key string, v *yaml.Node) { w.field(r, scope, "hot."+key, v) })
		default:
			w.field(r, scope, key, v)
		}
	})
	return r
}

// field decodes and checks the value v of one field into r.
func (w *walker) field(r *raw, scope, field string, v *yaml.Node) {
	var set func(*limit.Policy)
	var msg string
	switch field {
	case "name", "match", "algorithm", "on_store_error", "on_overload", "hot.mode", "scope", "durability":
		msg, set = decode(v, text, func(s string) (string, func(*limit.Policy)) { return textField(field, s) })
	case "calendar", "timezone":
		msg, set = decode(v, text, func(s string) (string, func(*limit.Policy)) { return calendarField(field, scope, s) })
	case "limit", "rate", "hot.threshold", "hot.split":
		msg, set = decode(v, integer, func(n int64) (string, func(*limit.Policy)) { return integerField(field, n) })
	case "period":
		var d time.Duration
		if d, msg = duration(v); msg == "" {
			msg, set = checkPeriod(d), func(p *limit.Policy) { p.Period = d }
		}
	case "max_ttl":
		var d time.Duration
		if d, msg = duration(v); msg == "" {
			msg, set = checkMaxTTL(d), func(p *limit.Policy) { p.MaxTTL = d }
		}
		if msg == "" && scope == "defaults" {
			msg = "not allowed in defaults: only a concurrency policy takes it, beside its own period"
		}
	case "local_share":
		var f float64
		if f, msg = number(v); msg == "" {
			msg, set = checkShare(f), func(p *limit.Policy) { p.LocalShare = f }
		}
	case "region_floor":
		var f float64
		if f, msg = number(v); msg == "" {
			msg, set = checkFloor(f), func(p *limit.Policy) { p.RegionFloor = floorValue(f) }
		}
	case "shadow":
		var b bool
		if b, msg = boolean(v); msg == "" {
			set = func(p *limit.Policy) { p.Shadow = b }
		}
	case "deny_cache":
		var b bool
		if b, msg = boolean(v); msg == "" {
			set = func(p *limit.Policy) { p.NoDenyCache = !b }
		}
	default:
		msg = "internal error: no decoder for this field"
	}
	if msg != "" {
		w.errorf(v.Line, scope, field, "%s", msg)
		r.bad[field] = true
		return
	}
	r.apply[field], r.lines[field] = set, v.Line
}

// decode reads v with dec and, when it reads, checks the value with use,
// which also says how to set it: the error message ("" for none) and the
// setter.
func decode[T any](v *yaml.Node, dec func(*yaml.Node) (T, string), use func(T) (string, func(*limit.Policy))) (string, func(*limit.Policy)) {
	x, msg := dec(v)
	if msg != "" {
		return msg, nil
	}
	return use(x)
}

// textField checks the string s of field and says how to set it.
func textField(field, s string) (string, func(*limit.Policy)) {
	switch field {
	case "name":
		return checkName(s), func(p *limit.Policy) { p.Name = s }
	case "match":
		_, msg := compileGlob(s)
		return msg, func(p *limit.Policy) { p.Match = s }
	case "algorithm":
		a := limit.Algorithm(s)
		return checkAlgorithm(a), func(p *limit.Policy) { p.Algorithm = a }
	case "on_store_error":
		m := limit.FailMode(s)
		return checkFailMode(m), func(p *limit.Policy) { p.OnStoreError = m }
	case "on_overload":
		m := limit.FailMode(s)
		return checkFailMode(m), func(p *limit.Policy) { p.OnOverload = m }
	case "durability":
		d := limit.Durability(s)
		msg := checkDurability(d)
		if d == limit.DurabilityNone {
			d = "" // the zero value: a policy that writes none is the one that says nothing
		}
		return msg, func(p *limit.Policy) { p.Durability = d }
	case "scope":
		sc := limit.Scope(s)
		return checkScope(sc), func(p *limit.Policy) { p.Scope = sc }
	case "hot.mode":
		m := limit.HotMode(s)
		return checkHotMode(m), func(p *limit.Policy) { p.Hot.Mode = m }
	}
	return "internal error: no string field " + field, nil
}

// integerField checks the integer n of field and says how to set it.
func integerField(field string, n int64) (string, func(*limit.Policy)) {
	switch field {
	case "limit":
		return checkPositive(n), func(p *limit.Policy) { p.Limit = n }
	case "rate":
		return checkPositive(n), func(p *limit.Policy) { p.Rate = n }
	case "hot.threshold":
		return checkPositive(n), func(p *limit.Policy) { p.Hot.Threshold = n }
	case "hot.split":
		return checkSplit(n), func(p *limit.Policy) { p.Hot.Split = int(n) }
	}
	return "internal error: no integer field " + field, nil
}

func text(v *yaml.Node) (string, string) {
	if v.Kind != yaml.ScalarNode {
		return "", "must be a string, got " + yamlnode.Describe(v)
	}
	return v.Value, ""
}

func integer(v *yaml.Node) (int64, string) {
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" {
		return 0, "must be a positive integer, got " + yamlnode.Describe(v)
	}
	// As yaml.v3 reads integers: 1_000, 0x10, 0o17 and 017 are allowed.
	n, err := strconv.ParseInt(strings.ReplaceAll(v.Value, "_", ""), 0, 64)
	if err != nil {
		return 0, "must be a positive integer below 2^63, got " + yamlnode.Describe(v)
	}
	return n, ""
}

func number(v *yaml.Node) (float64, string) {
	if v.Kind == yaml.ScalarNode && (v.ShortTag() == "!!int" || v.ShortTag() == "!!float") {
		if f, err := strconv.ParseFloat(strings.ReplaceAll(v.Value, "_", ""), 64); err == nil && !math.IsInf(f, 0) {
			return f, ""
		}
	}
	return 0, "must be a number, got " + yamlnode.Describe(v)
}

func boolean(v *yaml.Node) (bool, string) {
	if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!bool" {
		if b, err := strconv.ParseBool(v.Value); err == nil {
			return b, ""
		}
	}
	return false, "must be true or false, got " + yamlnode.Describe(v)
}

// duration reads a duration as parseDuration does; a bare 0 is allowed,
// any other bare number lacks its unit.
func duration(v *yaml.Node) (time.Duration, string) {
	const want = "must be a duration such as 500ms, 1s, 1m, 1h or 1d, got "
	if v.Kind != yaml.ScalarNode {
		return 0, want + yamlnode.Describe(v)
	}
	switch v.ShortTag() {
	case "!!str":
		if d, ok := parseDuration(v.Value); ok {
			return d, ""
		}
	case "!!int", "!!float":
		if f, err := strconv.ParseFloat(v.Value, 64); err == nil && f == 0 {
			return 0, ""
		} else if err == nil {
			return 0, fmt.Sprintf("needs a unit, such as %ss, got %s", yamlnode.Describe(v), yamlnode.Describe(v))
		}
	}
	return 0, want + yamlnode.Describe(v)
}
