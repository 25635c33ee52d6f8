package bench

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// HotLabResult is one arm of the hot-tenant experiment: every reply of
// every instance, counted by the load goroutines.
type HotLabResult struct {
	Mode HotLabMode
	// Replies is every reply, error replies and failed requests included,
	// over all instances; PerInstance splits it by instance.
	Replies     int64
	PerInstance []int64
	Admitted    int64
	Rejected    int64
	// Errors counts error replies, failed requests and malformed replies;
	// FirstError is the first of them, "" for none.
	Errors     int64
	FirstError string
	// DecidedBy counts the decisions (admitted and rejected) by the path
	// that answered: store, split, lease, fallback-closed …
	DecidedBy map[string]int64
	// Elapsed runs from the first request sent to the last reply
	// received.
	Elapsed time.Duration
	// Budget is the most the policy allows in Elapsed from a full bucket:
	// limit + rate × Elapsed.
	Budget float64
	// P50 and P99 are reply latencies in ms: a pipeline's round trip,
	// which each of its replies shares.
	P50, P99 float64
	// ScriptCalls are the script calls each primary ran during the load,
	// in HotLabReport.Primaries order.
	ScriptCalls []int64
	// Pids are the sluice processes of the arm.
	Pids []int

	end time.Time // the last reply, for the next arm's refill wait
}

// RPS is replies per second over Elapsed, all instances together.
func (r HotLabResult) RPS() float64 {
	if r.Elapsed <= 0 {
		return math.NaN()
	}
	return float64(r.Replies) / r.Elapsed.Seconds()
}

// Ratio is Admitted ÷ Budget.
func (r HotLabResult) Ratio() float64 { return ratio(float64(r.Admitted), r.Budget) }

// TotalScriptCalls is the script calls of every primary during the load.
func (r HotLabResult) TotalScriptCalls() int64 {
	var n int64
	for _, c := range r.ScriptCalls {
		n += c
	}
	return n
}

// Own is the fraction of the decisions that the arm's own path made
// (DecidedBy of the mode): store for strict, split, lease.
func (r HotLabResult) Own() float64 {
	return ratio(float64(r.DecidedBy[r.Mode.DecidedBy()]), float64(r.Admitted+r.Rejected))
}

// fill sets the result's counts and figures from the load.
func (r *HotLabResult) fill(ld loadResult, cfg HotLabConfig) {
	r.Admitted, r.Rejected, r.Errors = ld.admitted, ld.rejected, ld.errors
	r.Replies = ld.admitted + ld.rejected + ld.errors
	r.PerInstance = ld.perClient
	r.DecidedBy = ld.by
	if ld.firstErr != nil {
		r.FirstError = ld.firstErr.Error()
	}
	if !ld.first.IsZero() {
		r.Elapsed = ld.last.Sub(ld.first)
	}
	r.end = ld.last
	r.Budget = cfg.Budget(r.Elapsed)
	r.P50 = Percentile(ld.lat, 50)
	r.P99 = Percentile(ld.lat, 99)
}

// HotLabReport is `sluice lab hot`: the experiment (run) and what it measured.
type HotLabReport struct {
	Config    HotLabConfig // with every default applied
	Key       string       // the one key
	Owner     string       // the primary that owns it
	Primaries []string     // addresses, sorted
	Arms      []HotLabResult
	LabRun
}

// Markdown renders the report: the table, what its columns mean and the
// policy.
func (r *HotLabReport) Markdown() string { return render("hot", r) }

func joinInts(v []int64) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(s, " / ")
}

// formatCounts renders decided_by counts as "lease=123 store=4", sorted.
func formatCounts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+strconv.FormatInt(m[k], 10))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}
