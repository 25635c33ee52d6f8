package layercheck

import (
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// path is who decided an admission, as far as the bound cares.
type path int

const (
	pathStore  path = iota // the store's paths: store, lease, split, region (and every other word)
	pathOpen               // fallback-open, overload-open: admitted by design, outside the limit
	pathLocal              // fallback-local, overload-local: this instance's local_share bucket
	pathClosed             // fallback-closed, overload-closed: must never admit
)

// pathOf reads decided_by, in the words of the README's reply table.
func pathOf(by string) path {
	switch by {
	case "fallback-open", "overload-open":
		return pathOpen
	case "fallback-local", "overload-local":
		return pathLocal
	case "fallback-closed", "overload-closed":
		return pathClosed
	}
	return pathStore
}

// share is v's local_share bucket, as limit.Policy.Share makes it: limit
// and rate times local_share, rounded down, at least 1 each (a share of
// 0, or of 1 and more, is the whole policy).
func (v Variant) share() Variant {
	f := v.LocalShare
	if f <= 0 || f >= 1 {
		return v
	}
	v.Limit = max(1, int64(math.Floor(float64(v.Limit)*f)))
	v.Rate = max(1, int64(math.Floor(float64(v.Rate)*f)))
	return v
}

// shareBound is the most one instance's local bucket admits over an
// interval of seconds under the variants ss: the largest share burst plus
// the largest share rate times the interval (windows in their bucket
// form), and that burst (what one restart of the instance adds: its new
// bucket starts full).
func shareBound(ss []Span, seconds float64) (bound, burst float64) {
	var B, R float64
	for _, s := range ss {
		sv := s.V.share()
		bb, rr := sv.bucketForm()
		B, R = math.Max(B, bb), math.Max(R, rr)
		burst = math.Max(burst, float64(sv.Limit))
	}
	return B + R*seconds + 1e-9, burst
}

// shareLimit is the largest share limit of ss: a window's local room.
func shareLimit(ss []Span) int64 {
	var L int64
	for _, s := range ss {
		L = max(L, s.V.share().Limit)
	}
	return L
}

// localMay reports whether a variant of ss may decide by its local
// bucket: on_store_error local, or open (whose overload goes local), or
// unknown.
func localMay(ss []Span) bool {
	for _, s := range ss {
		switch s.V.OnStoreError {
		case "local", "open", "":
			return true
		}
	}
	return false
}

// instances is the instance count N of the fallback's bound: sl's, or
// the processes seen answering k if more (at least 1).
func instances(k *KeyLog, sl Slack) int {
	var ps []string
	for _, a := range k.Adm {
		if !slices.Contains(ps, a.Proc) {
			ps = append(ps, a.Proc)
		}
	}
	return max(1, sl.Instances, len(ps))
}

// restarts counts the sluice kills of proc ("": of any instance) whose
// [From, To] meets [a, b]: each gives that instance a new local bucket,
// full.
func restarts(fs []keyFault, proc string, a, b time.Time) int {
	n := 0
	for _, kf := range fs {
		f := kf.f
		to := f.To
		if to.IsZero() {
			to = farFuture
		}
		if f.Kind == FaultSluiceKill && (proc == "" || f.Target == proc) && !f.From.After(b) && !to.Before(a) {
			n++
		}
	}
	return n
}

// checkModes books an admission no policy in force could have made: one
// decided closed (closed admits nothing), and a fallback-open or
// fallback-local of a key none of whose variants in force had that
// on_store_error (an overload's mode is on_overload, which the variants do
// not carry: not checked).
func checkModes(k *KeyLog, adm []Admission, spans []Span, res *Result) {
	for _, x := range adm {
		note := ""
		switch p := pathOf(x.By); {
		case p == pathClosed:
			note = "admitted by " + x.By + ": a closed fallback admits nothing"
		case strings.HasPrefix(x.By, "fallback-") && p != pathStore:
			mode := strings.TrimPrefix(x.By, "fallback-")
			ok := false
			for _, s := range in(spans, x.Sent, x.Recv) {
				ok = ok || s.V.OnStoreError == mode || s.V.OnStoreError == ""
			}
			if !ok {
				note = "admitted by " + x.By + " under " + strings.Join(names(in(spans, x.Sent, x.Recv)), " | ") + ", whose on_store_error is not " + mode
			}
		}
		if note != "" {
			res.Violations = append(res.Violations, Violation{Key: k.Key, Policy: k.Policy, Kind: "fallback-mode", From: x.Sent, To: x.Recv,
				Admitted: x.Cost, Note: note, By: map[string]int{x.Door + "/" + x.By: 1}})
		}
	}
}

// checkShares checks each instance's local admissions (fallback-local and
// overload-local share one bucket per instance and key) against its
// share: over every interval [Sent_i, Recv_j] of them, at most the share
// burst plus the share rate times its length (windows: the share limit
// per window), plus one share burst per restart of that instance in it.
// Over it is a violation of kind local-share.
func checkShares(k *KeyLog, adm []Admission, spans []Span, fs []keyFault, res *Result) {
	byProc := map[string][]Admission{}
	for _, x := range adm {
		if pathOf(x.By) == pathLocal {
			byProc[x.Proc] = append(byProc[x.Proc], x)
		}
	}
	procs := make([]string, 0, len(byProc))
	for p := range byProc {
		procs = append(procs, p)
	}
	sort.Strings(procs)
	for _, p := range procs {
		loc := byProc[p]
		var worst *Violation
		over := func(v Violation) {
			if worst == nil || float64(v.Admitted)-v.Bound > float64(worst.Admitted)-worst.Bound {
				worst = &v
			}
		}
		for a, sentFrom := range intervals(loc) {
			var sum int64
			for x := range sentFrom {
				sum += x.Cost
				b := x.Recv
				ss := in(spans, a, b)
				if _, ok := windowsOnly(ss); ok || len(ss) == 0 {
					continue
				}
				bound, burst := shareBound(ss, b.Sub(a).Seconds())
				bound += burst * float64(restarts(fs, p, a, b))
				if float64(sum) > bound {
					over(Violation{Key: k.Key, Policy: k.Policy, Kind: "local-share", From: a, To: b, Admitted: sum, Bound: bound,
						Variants: append(names(ss), "instance "+p), By: byCount(loc, a, b)})
				}
			}
		}
		type win struct{ start, end time.Time }
		counts := map[win]int64{}
		for _, x := range loc {
			ss := in(spans, x.Sent, x.Recv)
			if _, ok := windowsOnly(ss); !ok {
				continue
			}
			start, end := ss[0].V.windowAt(x.Sent)
			if x.Recv.Before(end) {
				counts[win{start, end}] += x.Cost
			}
		}
		for w, n := range counts {
			ss := in(spans, w.start, w.end.Add(-1))
			if _, ok := windowsOnly(ss); !ok {
				continue
			}
			L := shareLimit(ss) * int64(1+restarts(fs, p, w.start, w.end))
			if n > L {
				over(Violation{Key: k.Key, Policy: k.Policy, Kind: "local-share", From: w.start, To: w.end, Admitted: n, Bound: float64(L),
					Variants: append(names(ss), "instance "+p), By: byCount(loc, w.start, w.end)})
			}
		}
		if worst != nil {
			res.Violations = append(res.Violations, *worst)
		}
	}
}
