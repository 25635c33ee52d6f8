// Package yamlnode holds what the config readers that walk yaml.Node
// themselves (sluice's policies, envoyproxy/ratelimit's descriptors) share:
// following aliases, describing a node in an error message, naming the
// field a mistyped key probably meant, and the text of an error.
package yamlnode

import (
	"strconv"
	"strings"
	"unicode"

	"gopkg.in/yaml.v3"
)

// Message is an error's text as both readers write it,
//
//	FILE:LINE: PART: …: MSG
//
// FILE:LINE cut to FILE when line is 0 and left out when file is empty;
// each empty part left out.
func Message(file string, line int, msg string, parts ...string) string {
	var b strings.Builder
	switch {
	case file != "" && line > 0:
		b.WriteString(file + ":" + strconv.Itoa(line) + ": ")
	case file != "":
		b.WriteString(file + ": ")
	}
	for _, p := range parts {
		if p != "" {
			b.WriteString(p + ": ")
		}
	}
	b.WriteString(msg)
	return b.String()
}

// Deref follows an alias to the node it names (8 hops at most).
func Deref(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 8; i++ {
		n = n.Alias
	}
	return n
}

// Describe describes a node for an error message: a scalar as written
// (quoted when YAML reads it as a string, cut at 64 bytes), else its kind.
func Describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		v := n.Value
		if len(v) > 64 {
			v = v[:60] + "…"
		}
		if n.ShortTag() == "!!str" || strings.ContainsFunc(v, func(r rune) bool { return !unicode.IsGraphic(r) || r == ' ' }) {
			return strconv.Quote(v)
		}
		return v
	}
	return "nothing"
}

// Suggest returns the known name closest to s, if it is a likely typo
// (at most two edits away); "" otherwise.
func Suggest(s string, known []string) string {
	if len(s) > 64 {
		return ""
	}
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(s, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance, for short names only.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
