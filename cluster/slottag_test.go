package cluster

import (
	"strings"
	"testing"
)

// Every slot has a tag, that tag hashes to it, and it has no brace.
func TestSlotTag(t *testing.T) {
	t.Parallel()
	for s := range 16384 {
		tag := slotTag(s)
		if strings.ContainsAny(tag, "{}") || Slot(tag) != s || Slot("x{"+tag+"}y") != s {
			t.Fatalf("slotTag(%d) = %q hashes to %d", s, tag, Slot(tag))
		}
	}
}
