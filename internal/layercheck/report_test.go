package layercheck

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

func (w *world) summary(t *testing.T, elapsed time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	total := 0
	var ops []string
	for k, n := range w.stats.ops {
		if k != "burst-take" {
			total += n
		}
		ops = append(ops, fmt.Sprintf("%s=%d", k, n))
	}
	total += w.stats.ops["burst-take"] - w.stats.ops["burst"]
	sort.Strings(ops)
	var by []string
	for k, n := range w.stats.by {
		by = append(by, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(by)
	var backs []string
	for mode, n := range w.stats.backs {
		backs = append(backs, fmt.Sprintf("%s=%d/%d", mode, n[0], n[1]))
	}
	sort.Strings(backs)
	regionLine := "none"
	if r := w.stats.regionMax; r != nil {
		regionLine = fmt.Sprintf("largest %d admitted vs bound %.2f over %.2fs on %q (within the floor's share)", r.Admitted, r.Bound, r.Seconds, r.Key)
	}
	line := fmt.Sprintf("layercheck summary: %v, %d iterations, operations %d (%s), keys %d, violations %d, inconclusive keys %d, decided_by {%s}, region excess: %s, slots certainly held at once: at most %d of %d, the rival's commands on the owner's keys refused: %d of %d (%d spend probes), give-backs applied/refused by receipt {%s}",
		elapsed.Round(time.Second), w.stats.iterations, total, strings.Join(ops, " "), w.stats.keys, len(w.stats.violations),
		w.stats.inconclusive, strings.Join(by, " "), regionLine, w.stats.slotsMost, slotLimit, w.stats.refused, w.stats.ops["rival"], w.stats.probes, strings.Join(backs, " "))
	t.Log(line)
	fmt.Fprintln(os.Stderr, line)
	var fb []string
	for k, n := range w.stats.fallbackBy {
		fb = append(fb, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(fb)
	s := fmt.Sprintf("fallback and overload decisions by policy: {%s}; admitted, and checked against their failure policy's bound: %d", strings.Join(fb, " "), w.stats.fallbackAdm)
	t.Log(s)
	fmt.Fprintln(os.Stderr, s)
	if w.nem != nil {
		w.nem.summary(t, w.stats.excess)
		s := fmt.Sprintf("concurrency slots held past the limit under faults, within the grants the store may have forgotten (most, by kind): %v", w.stats.slotsLost)
		t.Log(s)
		fmt.Fprintln(os.Stderr, s)
	}
	if len(w.stats.validRefused) > 0 {
		t.Logf("note: give-backs with an unused receipt of the key's, refused (policy changed, window closed, expired): %v", w.stats.validRefused)
	}
	if w.stats.by["lease"] == 0 || w.stats.by["split"] == 0 {
		t.Logf("note: the hot paths did not both engage (lease %d, split %d decisions)", w.stats.by["lease"], w.stats.by["split"])
	}
	if n := fallbacks(w.stats.by); n > 0 && w.nem == nil {
		t.Logf("note: %d fallback/overload decisions although every node is up", n)
	}
	var cats []string
	for c := range w.stats.categories {
		cats = append(cats, c)
	}
	sort.Strings(cats)
	for _, c := range cats {
		s := fmt.Sprintf("violations: %d × %s; e.g. %s", w.stats.categories[c], c, w.stats.examples[c])
		t.Log(s)
		fmt.Fprintln(os.Stderr, s)
	}
	if len(w.stats.firstTrace) > 0 {
		t.Logf("the first iteration with a violation, as it ran (ms since its start):\n    %s", strings.Join(w.stats.firstTrace, "\n    "))
	}
	if w.keepGoing && len(cats) > 0 {
		t.Errorf("%d violations in %d categories (above)", len(w.stats.violations), len(cats))
	}
}

func fallbacks(by map[string]int) int {
	n := 0
	for k, v := range by {
		if strings.HasPrefix(k, "fallback-") || strings.HasPrefix(k, "overload-") {
			n += v
		}
	}
	return n
}

// doors names the doors in a violation's decided_by counts.
func doors(by map[string]int) string {
	var out []string
	for k := range by {
		d, _, _ := strings.Cut(k, "/")
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "+")
}

// about returns the actions of the trace that name key's base (every
// spelling of it) or change a policy: the story of one violation.
func (it *iteration) about(key string) []string {
	b := key
	for n := 0; it.bases[b] != "" && it.bases[b] != b && n < 4; n++ {
		b = it.bases[b]
	}
	var out []string
	for _, l := range it.trace {
		if strings.Contains(l, b) || strings.Contains(l, " policy ") || strings.Contains(l, " sighup ") {
			out = append(out, l)
		}
	}
	return out
}

func (it *iteration) admissions(k *KeyLog) string {
	var b strings.Builder
	for _, a := range k.Adm {
		fmt.Fprintf(&b, "%d-%d %d %s/%s; ", it.ms(a.Sent), it.ms(a.Recv), a.Cost, a.Door, a.By)
	}
	for _, r := range k.Resets {
		fmt.Fprintf(&b, "RESET %d-%d; ", it.ms(r.Sent), it.ms(r.Recv))
	}
	return b.String()
}
