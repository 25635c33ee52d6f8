package metrics

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
)

// The policy label. Its values come from the config and never from a key:
// a policy's name (the file's, RL.POLICY's, an --envoy-config rule's, or
// cl.throttle), "" when no policy matched, or OtherPolicy past
// MaxPolicyLabels.

// MaxPolicyLabels bounds the distinct values of the policy label over
// every family of this process. Policies can be added at run time
// (RL.POLICY SET) without end; past the bound, a policy not seen before
// is counted under OtherPolicy. Series of a deleted policy stay until the
// process restarts (counters are never taken back).
const MaxPolicyLabels = 256

// OtherPolicy is the policy label of the policies past MaxPolicyLabels.
// A policy name may not contain spaces, so no policy can be named so.
const OtherPolicy = "other policies"

// policyLabels hands out policy label values, at most MaxPolicyLabels
// distinct ones; it is called from the caches' make, so only the first
// time a combination is seen.
type policyLabels struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (l *policyLabels) label(name string) string {
	if name == "" {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[name] {
		return name
	}
	if len(l.seen) >= MaxPolicyLabels {
		return OtherPolicy
	}
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	l.seen[name] = true
	return name
}

func policyName(p *limit.Policy) string {
	if p == nil {
		return ""
	}
	return p.Name
}

// The kinds of sluice_errors_total: why a request was answered with an
// error reply instead of a decision (nothing was spent).
const (
	ErrorNoPolicy       = "no_policy"       // no policy matches the key
	ErrorStore          = "store"           // Redis answered with an error that is not about connectivity: a bug to surface
	ErrorUnavailable    = "unavailable"     // a connectivity failure that reached the client (not expected: on_store_error answers those)
	ErrorInternal       = "internal"        // anything else: a malformed script reply
	ErrorFull           = "store_full"      // the in-process store holds only live states: a new key is refused (local.ErrFull)
	ErrorReceipt        = "receipt"         // a give-back with a missing, forged, expired, reused or foreign receipt (limit.ErrReceipt)
	ErrorWrongAlgorithm = "wrong_algorithm" // a rate command on a concurrency policy, or RL.ACQUIRE on a rate policy
	ErrorNotAdjustable  = "not_adjustable"  // RL.ADJUST on a policy that cannot be adjusted (scope: global)
	ErrorMaxTTL         = "max_ttl"         // RL.ACQUIRE's ttl_ms above the policy's max_ttl
	ErrorNoPerm         = "noperm"          // a door refused the command or one of its keys for the user (NOPERM, HTTP 403, gRPC PermissionDenied)
	ErrorAuth           = "auth"            // a failed authentication (a wrong password)
)

var errorKinds = [...]string{ErrorNoPolicy, ErrorStore, ErrorUnavailable, ErrorInternal, ErrorFull,
	ErrorReceipt, ErrorWrongAlgorithm, ErrorNotAdjustable, ErrorMaxTTL, ErrorNoPerm, ErrorAuth}

type errorKey struct {
	front, policy string
	kind          uint8 // index in errorKinds
}

func errorIndex(err error) uint8 {
	switch {
	case errors.Is(err, limit.ErrNoPolicy):
		return 0
	case errors.Is(err, limit.ErrReceipt):
		return 5
	case errors.Is(err, limit.ErrWrongAlgorithm):
		return 6
	case errors.Is(err, limit.ErrNotAdjustable):
		return 7
	case errors.Is(err, limit.ErrSlotTTL):
		return 8
	case isRedisError(err):
		return 1
	case errors.Is(err, limit.ErrUnavailable):
		return 2
	case errors.Is(err, local.ErrFull):
		return 4
	}
	return 3
}

// isRedisError reports whether err is an error reply of Redis; apart, so
// that the target errors.As needs is allocated only when it is asked.
func isRedisError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// DecisionError counts one error reply of the limiter to a request of
// the door front under p (nil: no policy matched); it is
// limiter.Config.OnError. It does not allocate once the combination has
// been seen.
func (m *Metrics) DecisionError(front string, p *limit.Policy, err error) {
	m.errCache.get(errorKey{front, policyName(p), errorIndex(err)}).Inc()
}

// Refused counts one request a door refused before the limiter saw it,
// kind ErrorNoPerm or ErrorAuth; p is the policy of the refused key, nil
// when a command (or a password) was refused rather than a key.
func (m *Metrics) Refused(front string, p *limit.Policy, kind string) {
	i := uint8(3)
	for j, k := range errorKinds {
		if k == kind {
			i = uint8(j)
		}
	}
	m.errCache.get(errorKey{front, policyName(p), i}).Inc()
}

type correctionKey struct{ front, policy, kind, by string }

type tokensKey struct{ front, policy, kind string }

// Correction counts one correction of what was spent, of kind (one of
// limiter's Correction constants), under p, applied by the path decidedBy ("" for
// a release), moving tokens tokens (0 when none moved); it is
// limiter.Config.OnCorrection. It does not allocate once the combination
// has been seen.
func (m *Metrics) Correction(front string, p *limit.Policy, kind, decidedBy string, tokens int64) {
	name := policyName(p)
	m.corrCache.get(correctionKey{front, name, kind, decidedBy}).Inc()
	if tokens > 0 {
		m.tokCache.get(tokensKey{front, name, kind}).Add(float64(tokens))
	}
}

// newPolicyFamilies makes the per-policy families of errors and
// corrections and their caches.
func (m *Metrics) newPolicyFamilies() []prometheus.Collector {
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "errors_total",
		Help: "Requests answered with an error reply instead of a decision (nothing spent), by door, policy (\"\" when none matched) and kind: no_policy, store (an error Redis returned), unavailable, internal, store_full, receipt, wrong_algorithm, not_adjustable, max_ttl, noperm, auth.",
	}, []string{"front", "policy", "kind"})
	m.errCache.make = func(k errorKey) prometheus.Counter {
		return errs.WithLabelValues(k.front, m.policies.label(k.policy), errorKinds[k.kind])
	}
	corr := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "corrections_total",
		Help: "Corrections of what was spent, by door, policy, kind (spend, give_back, give_back_unapplied, mtake_refund, mtake_refund_failed, release, release_unknown) and the path that applied them (decided_by; \"\" for releases).",
	}, []string{"front", "policy", "kind", "decided_by"})
	m.corrCache.make = func(k correctionKey) prometheus.Counter {
		return corr.WithLabelValues(k.front, m.policies.label(k.policy), k.kind, k.by)
	}
	tok := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "correction_tokens_total",
		Help: "Tokens moved by corrections, by door, policy and kind: spend (spent by RL.ADJUST without a check), give_back (given back with a receipt), mtake_refund (given back by a refused RL.MTAKE).",
	}, []string{"front", "policy", "kind"})
	m.tokCache.make = func(k tokensKey) prometheus.Counter {
		return tok.WithLabelValues(k.front, m.policies.label(k.policy), k.kind)
	}
	return []prometheus.Collector{errs, corr, tok}
}
