// Package envoycfg reads envoyproxy/ratelimit's configuration (YAML files of
// domains and nested descriptors) and matches Envoy's rate-limit
// descriptors to sluice policies, so that a user of that service points
// sluice at the same directory (--envoy-config) and changes nothing.
//
// It also names the sluice key of a descriptor (Key): the one mapping every
// door uses, whether the rules come from an Envoy config or from sluice's
// own policies (which then match the key with their globs).
package envoycfg

import "strings"

// Entry is one entry of an Envoy rate-limit descriptor.
type Entry struct {
	Key, Value string
}

// Key is the sluice key of the descriptor entries of domain:
//
//	<domain>:<key1>=<value1>:<key2>=<value2>…
//
// with '%', ':' and '=' inside each part written as %25, %3A and %3D, so
// that the mapping is injective (two different descriptors never share a
// bucket, an IPv6 address included) and readable for the common case.
// sluice policies match it with globs, e.g. "edge:remote_address=*".
func Key(domain string, entries []Entry) string {
	var b strings.Builder
	b.Grow(len(domain) + 16*len(entries))
	escape(&b, domain)
	for _, e := range entries {
		b.WriteByte(':')
		escape(&b, e.Key)
		b.WriteByte('=')
		escape(&b, e.Value)
	}
	return b.String()
}

func escape(b *strings.Builder, s string) {
	if !strings.ContainsAny(s, "%:=") {
		b.WriteString(s)
		return
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '%':
			b.WriteString("%25")
		case ':':
			b.WriteString("%3A")
		case '=':
			b.WriteString("%3D")
		default:
			b.WriteByte(c)
		}
	}
}
