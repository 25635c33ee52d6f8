package rls

import (
	"github.com/sluice-rl/sluice/envoycfg"
	"github.com/sluice-rl/sluice/limit"
)

// Matcher finds the policy of one descriptor of domain: nil and false when no rule
// matches (the descriptor is OK and unlimited, as envoyproxy/ratelimit answers),
// unlimited true for a rule that says so.
type Matcher interface {
	Match(domain string, entries []envoycfg.Entry) (p *limit.Policy, unlimited bool)
}

// PolicyMatcher matches sluice's own policies against the descriptor's key,
// envoycfg.Key(domain, entries): a policy with match "edge:remote_address=*"
// limits every client address of domain edge. match is usually the policy
// holder's current set; it is called once per descriptor and must be safe
// for concurrent use. sluice's policies have no "unlimited" rule: a
// descriptor no policy matches is unlimited.
func PolicyMatcher(match func(key string) *limit.Policy) Matcher {
	return policyMatcher(match)
}

type policyMatcher func(key string) *limit.Policy

func (m policyMatcher) Match(domain string, entries []envoycfg.Entry) (*limit.Policy, bool) {
	return m(envoycfg.Key(domain, entries)), false
}

// RequestMatcher is a Matcher that looks at a request's descriptors
// together, as envoyproxy/ratelimit's configuration needs: a rule that
// replaces another when both match one request, and share_threshold
// wildcards, whose values share one counter (Hit.Key). *envoycfg.Holder
// is one. The door uses it, when the Matcher is one, instead of Match.
type RequestMatcher interface {
	Matcher
	LookupRequest(domain string, descriptors [][]envoycfg.Entry) []envoycfg.Hit
}
