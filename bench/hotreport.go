package bench

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
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

// HotLabReport is what HotLab measured.
type HotLabReport struct {
	Config    HotLabConfig // with every default applied
	Machine   Machine
	Key       string   // the one key
	Owner     string   // the primary that owns it
	Primaries []string // addresses, sorted
	Arms      []HotLabResult
	Elapsed   time.Duration
}

// Markdown renders the report: the table, what its columns mean and the
// policy.
func (r *HotLabReport) Markdown() string {
	c := r.Config
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# sluice lab hot: one hot key through %d sluice instances\n\n", c.Instances)
	w("Machine: %s.\n\n", r.Machine)
	w("Key `%s` (Redis key `%s`, owned by %s of %d primaries). Policy: limit %d, rate %d per %s, on_store_error closed, "+
		"hot threshold %d requests/s per instance, split %d, timeout %s; only the hot mode differs between arms. "+
		"Load per arm: %d instances × %d go-redis goroutines, each sending pipelines of %d `RL.TAKE %s 1`, for %s (at most %s requests); "+
		"the whole run took %s.\n\n",
		r.Key, redisKey(r.Key), r.Owner, len(r.Primaries), c.Limit, c.Rate, c.Period, c.Threshold, c.Split, c.Timeout,
		c.Instances, c.Workers, c.Pipeline, r.Key, c.Duration, thousands(float64(c.MaxRequests)), r.Elapsed.Round(time.Second))
	w("| mode | requests/s | p50 / p99 ms | replies | admitted | budget | admitted/budget | decided_by | errors | script calls | elapsed |\n")
	w("|---|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|\n")
	for _, a := range r.Arms {
		var calls int64
		for _, n := range a.ScriptCalls {
			calls += n
		}
		w("| %s | %s | %s / %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			a.Mode, thousands(a.RPS()), fixed(a.P50, 3), fixed(a.P99, 3), thousands(float64(a.Replies)),
			thousands(float64(a.Admitted)), thousands(a.Budget), fixed(a.Ratio(), 3), formatCounts(a.DecidedBy),
			thousands(float64(a.Errors)), thousands(float64(calls)), a.Elapsed.Round(time.Millisecond))
	}
	w("\n")
	w("- **requests/s**: every reply of every instance (admitted, rejected and errors) over the elapsed time, " +
		"from the first request sent to the last reply received.\n")
	w("- **p50 / p99**: reply latency, the round trip of the pipeline that carried the request.\n")
	w("- **budget**: limit + rate × elapsed, the most one bucket can admit from full; the bucket is full at the start of every arm " +
		"(RL.PEEK checks it, after waiting one refill time since the previous arm). " +
		"admitted/budget above 1 is over-admission; far below 1 is tokens left unused (a lease not spent, a sub-bucket not reached).\n")
	w("- **decided_by**: the sixth element of every reply; strict is decided by `store`, split by `split`, lease by `lease` once the key is hot " +
		"(each instance sees it above the threshold), and any `fallback-*` means the store did not answer within the timeout.\n")
	w("- **script calls**: EVAL/EVALSHA calls on the primaries during the load (INFO commandstats), per primary: %s.\n\n",
		strings.Join(r.Primaries, ", "))
	if len(r.Arms) > 0 {
		w("| mode | replies per instance | script calls per primary | sluice pids | first error |\n|---|--:|--:|---|---|\n")
		for _, a := range r.Arms {
			first := a.FirstError
			if first == "" {
				first = "none"
			}
			w("| %s | %s | %s | %s | %s |\n", a.Mode, joinInts(a.PerInstance), joinInts(a.ScriptCalls),
				fmt.Sprint(a.Pids), strings.ReplaceAll(first, "|", `\|`))
		}
		w("\n")
	}
	w("The %s arm's policy file (the others differ in `hot.mode`):\n\n```yaml\n%s```\n", LabLease, c.policyYAML(LabLease))
	return b.String()
}

// Write prints the markdown to w and writes it to path when path is set;
// missing folders are made.
func (r *HotLabReport) Write(w io.Writer, path string) error {
	return WriteMarkdown(w, path, r.Markdown())
}

// WriteMarkdown prints md to w and writes it to path when path is set;
// missing folders are made.
func WriteMarkdown(w io.Writer, path, md string) error {
	if _, err := io.WriteString(w, md); err != nil {
		return err
	}
	if path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	return nil
}

func joinInts(v []int64) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(s, " / ")
}
