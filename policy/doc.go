// Package policy reads, checks and serves sluice's rate-limit policies: the
// YAML config (docs/configuration.md, "The policy file"; the fields and
// their checks are in yaml.go), validated strictly with the file, policy
// and field in every error; the matching of a key to the
// first policy whose glob matches it, which runs on every request and does
// not allocate; and a Holder that swaps in a reloaded config atomically,
// keeping the last good one when the new one is wrong.
//
// Globs are Redis KEYS-style: `*`, `?`, `[abc]`, `[a-z]`, `[^a]`, and `\`
// to escape. Matching is linear in key × pattern in the worst case, so no
// pattern or key can make it take exponential time.
//
// It must not import any sluice package but limit, must not read flags,
// environment or the clock, and holds no package state: the policies it
// returns are plain limit.Policy values that the layers below consume.
package policy
