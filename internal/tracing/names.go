package tracing

import (
	"slices"
	"strings"
)

// Names gathers the distinct values of one attribute over a batch (its
// policies, its decided_by paths, its scripts) for the batch's span. A
// batch has few, so a scan beats a map. The zero value is empty.
type Names []string

// Add adds v unless it is there.
func (n *Names) Add(v string) {
	if !slices.Contains(*n, v) {
		*n = append(*n, v)
	}
}

// String is the names sorted and comma-joined: "gcra,token_bucket".
func (n Names) String() string {
	slices.Sort(n)
	return strings.Join(n, ",")
}
