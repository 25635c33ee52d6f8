package policy

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sluice-rl/sluice/internal/yamlnode"
	"github.com/sluice-rl/sluice/limit"
)

// Limits and defaults of the config.
const (
	// MaxTimeout is the largest store deadline a config may set.
	MaxTimeout = 10 * time.Second
	// DefaultPeriod is a policy's period when neither it nor defaults set one.
	DefaultPeriod = time.Second
	// MaxSplit is the largest number of sub-buckets of a split hot key.
	MaxSplit = 64
	// MaxConfigBytes is the largest config file Parse reads.
	MaxConfigBytes = 1 << 20

	maxNameBytes = 128
	maxErrors    = 20
)

// Error is one problem of a config, with where it is. Parse, Load, NewSet
// and ParsePolicyJSON return these (several joined with errors.Join when
// there are several); errors.As finds the first.
//
// Its text is one line:
//
//	FILE:LINE: SCOPE: FIELD: MSG
//
// where each of the first four parts is left out when empty or zero.
type Error struct {
	File  string // the config file; "" when not from a file
	Line  int    // 1-based; 0 when unknown
	Scope string // `policy #2 "api"`, `policy "api"`, `defaults`, or "" at top level
	Field string // e.g. "limit", "hot.mode"; "" when about the scope itself
	Msg   string
}

func (e *Error) Error() string {
	if e.File == "" && e.Line > 0 {
		return yamlnode.Message("", 0, e.Msg, "line "+strconv.Itoa(e.Line), e.Scope, e.Field)
	}
	return yamlnode.Message(e.File, e.Line, e.Msg, e.Scope, e.Field)
}

// errorList collects Errors in the order they are found.
type errorList []*Error

func (l *errorList) add(e *Error) { *l = append(*l, e) }

// sort orders the list by line, keeping the order of each line's errors.
func (l errorList) sort() {
	slices.SortStableFunc(l, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
}

// err joins the list, keeping at most maxErrors so that a garbage file
// does not produce a wall of text.
func (l errorList) err() error {
	if len(l) == 0 {
		return nil
	}
	n := min(len(l), maxErrors)
	errs := make([]error, 0, n+1)
	for _, e := range l[:n] {
		errs = append(errs, e)
	}
	if more := len(l) - n; more == 1 {
		errs = append(errs, errors.New("… and 1 more error"))
	} else if more > 1 {
		errs = append(errs, fmt.Errorf("… and %d more errors", more))
	}
	return errors.Join(errs...)
}

func scopeOf(index int, name string) string {
	switch {
	case index > 0 && name != "":
		return fmt.Sprintf("policy #%d %q", index, name)
	case index > 0:
		return fmt.Sprintf("policy #%d", index)
	}
	return fmt.Sprintf("policy %q", name)
}

// The checks below test one value that was written down; they return ""
// when it is fine, else the message. The YAML walker runs them on each
// value as it decodes it, check runs them on a whole policy.

func checkName(s string) string {
	if len(s) > maxNameBytes {
		return fmt.Sprintf("must be at most %d bytes, got %d", maxNameBytes, len(s))
	}
	if !utf8.ValidString(s) {
		return "must be valid UTF-8"
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fmt.Sprintf("must not contain spaces or control characters, got %q", s)
		}
	}
	return ""
}

const supportedAlgorithms = "token_bucket | gcra | sliding_window | fixed_window | concurrency"

func checkAlgorithm(a limit.Algorithm) string {
	for _, known := range limit.Algorithms {
		if a == known {
			return ""
		}
	}
	if a.IsConcurrency() { // RL.ACQUIRE's, not in limit.Algorithms (RL.TAKE's)
		return ""
	}
	return fmt.Sprintf("unknown algorithm %q, want %s", a, supportedAlgorithms)
}

func checkPositive(v int64) string {
	if v < 1 {
		return fmt.Sprintf("must be a positive integer, got %d", v)
	}
	if v > limit.MaxScaled {
		return fmt.Sprintf("must be at most 2^53 (%d), got %d", int64(limit.MaxScaled), v)
	}
	return ""
}

func checkPeriod(d time.Duration) string {
	if d <= 0 {
		return fmt.Sprintf("must be positive, got %s", formatDuration(d))
	}
	if d%time.Microsecond != 0 {
		return fmt.Sprintf("must be a whole number of microseconds, got %s", d)
	}
	return ""
}

func checkTimeout(d time.Duration) string {
	if d < 0 || d > MaxTimeout {
		return fmt.Sprintf("must be between 0 (meaning %s) and %s, got %s",
			formatDuration(limit.DefaultTimeout), formatDuration(MaxTimeout), formatDuration(d))
	}
	return ""
}

const failModes = "open | closed | local"

func checkFailMode(m limit.FailMode) string {
	switch m {
	case limit.FailOpen, limit.FailClosed, limit.FailLocal:
		return ""
	}
	return fmt.Sprintf("must be one of %s, got %q", failModes, m)
}

func checkShare(f float64) string {
	if math.IsNaN(f) || f <= 0 || f > 1 {
		return fmt.Sprintf("must be greater than 0 and at most 1, got %s", strconv.FormatFloat(f, 'g', -1, 64))
	}
	return ""
}

func checkDurability(d limit.Durability) string {
	switch d {
	case limit.DurabilityNone, limit.DurabilityReplica:
		return ""
	}
	return fmt.Sprintf("must be one of none | replica, got %q", d)
}

func checkScope(s limit.Scope) string {
	switch s {
	case limit.ScopeRegional, limit.ScopeGlobal:
		return ""
	}
	return fmt.Sprintf("must be one of regional | global, got %q", s)
}

// checkFloor checks a region_floor as written: a share from 0 (none) to 1.
func checkFloor(f float64) string {
	if math.IsNaN(f) || f < 0 || f > 1 {
		return fmt.Sprintf("must be from 0 to 1, got %s", strconv.FormatFloat(f, 'g', -1, 64))
	}
	return ""
}

// floorValue is the Policy.RegionFloor of a region_floor as written: an
// explicit 0 is NoRegionFloor, as Policy's zero means the default.
func floorValue(f float64) float64 {
	if f == 0 {
		return limit.NoRegionFloor
	}
	return f
}

func checkHotMode(m limit.HotMode) string {
	switch m {
	case limit.HotOff, limit.HotLease, limit.HotSplit:
		return ""
	}
	return fmt.Sprintf("must be one of off | lease | split, got %q", m)
}

func checkSplit(k int64) string {
	if k < 2 || k > MaxSplit {
		return fmt.Sprintf("must be an integer from 2 to %d, got %d", MaxSplit, k)
	}
	return ""
}

// checkSlotFields reports the fields that only a concurrency policy may
// have, or that it bounds more tightly (max_ttl, limit), marking them bad.
func checkSlotFields(p *limit.Policy, bad map[string]bool, report func(field, msg string)) {
	if p.MaxTTL != 0 && !bad["max_ttl"] && !bad["algorithm"] && !p.Algorithm.IsConcurrency() {
		bad["max_ttl"] = true
		report("max_ttl", "only with algorithm concurrency: it caps RL.ACQUIRE's ttl_ms")
	}
	if p.Algorithm.IsConcurrency() && !bad["limit"] && p.Limit > limit.MaxSlots {
		bad["limit"] = true
		report("limit", fmt.Sprintf("must be from 1 to %d slots with algorithm concurrency, got %d", limit.MaxSlots, p.Limit))
	}
}

// check reports every problem of a policy through report. Fields in skip
// were already reported where they were written, so they are neither
// checked again nor called missing. Zero values mean unset: the required
// fields are name, match, limit, rate and on_store_error.
func check(p *limit.Policy, skip map[string]bool, report func(field, msg string)) {
	bad := map[string]bool{}
	test := func(field string, unset bool, required, msg string) {
		switch {
		case skip[field]:
			bad[field] = true
		case unset && required != "":
			bad[field] = true
			report(field, "required"+required)
		case !unset && msg != "":
			bad[field] = true
			report(field, msg)
		}
	}
	_, globMsg := compileGlob(p.Match)

	test("name", p.Name == "", ": a unique name for the policy", checkName(p.Name))
	test("match", p.Match == "", `: a glob on the key, such as "api:*"`, globMsg)
	test("algorithm", p.Algorithm == "", "", checkAlgorithm(p.Algorithm))
	test("limit", p.Limit == 0, ": the burst capacity, a positive integer", checkPositive(p.Limit))
	rateRequired := ""
	if p.Algorithm.IsBucket() || bad["algorithm"] {
		rateRequired = ": tokens refilled per period, a positive integer"
	}
	test("rate", p.Rate == 0, rateRequired, checkPositive(p.Rate))
	if p.Algorithm.IsConcurrency() && p.Rate != 0 && !bad["rate"] {
		bad["rate"] = true
		report("rate", "must not be given with algorithm concurrency: limit is the slots held at once, period a slot's TTL")
	}
	periodRequired := ""
	if p.Algorithm.IsConcurrency() {
		periodRequired = ": a slot's TTL when RL.ACQUIRE names none, 1ms to 24h (a concurrency policy does not take defaults.period)"
	}
	test("period", p.Period == 0, periodRequired, checkPeriod(p.Period))
	test("on_store_error", p.OnStoreError == "", " ("+failModes+"), set it here or in defaults", checkFailMode(p.OnStoreError))
	test("on_overload", p.OnOverload == "", "", checkFailMode(p.OnOverload))
	test("local_share", p.LocalShare == 0, "", checkShare(p.LocalShare))
	test("hot.mode", p.Hot.Mode == "", "", checkHotMode(p.Hot.Mode))
	test("hot.threshold", p.Hot.Threshold == 0, "", checkPositive(p.Hot.Threshold))
	test("hot.split", p.Hot.Split == 0, "", checkSplit(int64(p.Hot.Split)))
	test("scope", p.Scope == "", "", checkScope(p.Scope))
	test("durability", p.Durability == "", "", checkDurability(p.Durability))
	if p.Global() {
		if !bad["algorithm"] && !p.Algorithm.IsBucket() {
			report("scope", fmt.Sprintf("global needs a bucket algorithm (token_bucket or gcra), not %s: regions claim tokens from it", p.Algorithm))
		}
		if !bad["hot.mode"] && p.Hot.Mode != "" && p.Hot.Mode != limit.HotOff {
			report("hot.mode", "must be off when scope is global: a region's allocation already keeps its decisions on the continent")
		}
	}

	if !bad["hot.mode"] && (p.Hot.Mode == limit.HotLease || p.Hot.Mode == limit.HotSplit) {
		if !bad["algorithm"] && !p.Algorithm.IsBucket() {
			report("hot.mode", fmt.Sprintf("%s needs a bucket algorithm (token_bucket or gcra), not %s", p.Hot.Mode, p.Algorithm))
		}
		if p.Hot.Mode == limit.HotSplit {
			test("hot.split", p.Hot.Split == 0, fmt.Sprintf(" when hot.mode is split: the number of sub-buckets, 2 to %d", MaxSplit), "")
		}
	}
	test("max_ttl", p.MaxTTL == 0, "", checkMaxTTL(p.MaxTTL))
	checkSlotFields(p, bad, report)
	if bad["limit"] || bad["rate"] || bad["period"] || bad["algorithm"] {
		return
	}
	q := *p
	if q.Period == 0 {
		q.Period = DefaultPeriod
	}
	if q.Algorithm.IsConcurrency() {
		checkSlots(&q, bad["max_ttl"], report)
	} else if q.Algorithm.IsBucket() {
		if _, err := q.Bucket(); err != nil {
			report("period", err.Error())
		}
	} else if _, err := q.Window(); err != nil {
		report("period", err.Error())
	}
}

// checkSlots reports the problems of a concurrency policy's period and
// max_ttl (the limit is checked before); skipMax: max_ttl was reported
// already.
func checkSlots(p *limit.Policy, skipMax bool, report func(field, msg string)) {
	q := *p
	q.MaxTTL = 0
	if _, err := q.Slots(); err != nil {
		report("period", err.Error())
		return
	}
	if p.MaxTTL != 0 && !skipMax && p.MaxTTL < p.Period {
		report("max_ttl", fmt.Sprintf("must be at least the period (%s): an RL.ACQUIRE naming no ttl_ms holds its slot for the period, got %s",
			formatDuration(p.Period), formatDuration(p.MaxTTL)))
	}
}

// checkMaxTTL checks a max_ttl as written: whole ms, 1ms to 24h.
func checkMaxTTL(d time.Duration) string {
	if d < time.Millisecond || d%time.Millisecond != 0 || d > limit.MaxSlotTTL {
		return fmt.Sprintf("must be a whole number of milliseconds from 1ms to %dh, got %s", limit.MaxSlotTTL/time.Hour, formatDuration(d))
	}
	return ""
}

// formatDuration writes d in the largest unit that holds it exactly, in a
// form parseDuration reads back: 1d, 12h, 1m, 50ms.
func formatDuration(d time.Duration) string {
	if d <= 0 {
		return d.String()
	}
	units := []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}}
	for _, u := range units {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return d.String()
}

// parseDuration reads a Go duration (500ms, 1s, 1m, 1h30m), optionally
// preceded by whole days: 1d, 7d, 1d12h.
func parseDuration(s string) (time.Duration, bool) {
	if i := strings.IndexByte(s, 'd'); i > 0 && strings.Trim(s[:i], "0123456789") == "" {
		days, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil || days > math.MaxInt64/int64(24*time.Hour) {
			return 0, false
		}
		d := time.Duration(days) * 24 * time.Hour
		if rest := s[i+1:]; rest != "" {
			r, err := time.ParseDuration(rest)
			if err != nil || r < 0 || r > math.MaxInt64-d || rest[0] == '+' {
				return 0, false
			}
			d += r
		}
		return d, true
	}
	d, err := time.ParseDuration(s)
	return d, err == nil
}
