package layercheck

import (
	"fmt"
	"slices"
	"time"
)

// GiveBack is one RL.ADJUST of a negative delta, as its sender saw it:
// in flight in [Sent, Recv], asking Delta tokens back (> 0) with Receipt
// ("" for none), and whether it was answered as applied (the six fields)
// rather than refused (an error reply, a 4xx).
type GiveBack struct {
	Sent, Recv time.Time
	Delta      int64
	Receipt    string
	Applied    bool
	By         string // decided_by of an applied one
	Who        string // the tenant that sent it (owner, rival)
	User       string // the sluice user it authenticated as ("default" without users)
}

// Taken is the take a receipt names: its cost, and who took it (for the
// report).
type Taken struct {
	Cost int64
	Who  string
	User string // the sluice user that took it; only that user may give it back
}

// credited turns k's give-backs into what the bound may count: per key,
// admitted ≤ limit + rate × T + the valid receipts given back. A
// give-back is valid when it was answered as applied and named the
// receipt of an admitted take of this key (k.Receipts) that no earlier
// applied give-back named, for at most that take's cost; it credits what
// it gave. A receipt is its user's (docs/receipts.md): one given back by
// another sluice user names no take, so it is valid only from the user
// that took it (without users every tenant is "default"). Any other
// give-back answered as applied is returned in refused: the contract says
// it is an error that changes nothing, so it earns no credit (a refused
// give-back must not let later takes admit beyond the bound) and is a
// violation by itself. Refused give-backs answered as refused count for
// nothing: they changed nothing, which the bound checks.
//
// The receipt's policy is not checked here: which policy a sluice
// instance had in force is known only within a propagation window, and
// an interval across a change is bounded by the larger policy anyway.
//
// forgotten(prev, g) reports whether the store may have forgotten prev, the
// applied give-back that used g's receipt first, by the time g ran: a kill
// of the key's node lost prev with the rest of its replication lag (a
// give-back never waits for a replica, docs/durability.md), so the
// promoted replica holds the receipt unused and applies g. That is no
// violation, and earns nothing more: the bucket forgot prev's credit with
// it, and the kill's allowance covers what prev's credit admitted.
func credited(k *KeyLog, forgotten func(prev, g GiveBack) bool) (back []Admission, refused []GiveBack) {
	gs := slices.Clone(k.Backs)
	slices.SortStableFunc(gs, func(x, y GiveBack) int { return x.Sent.Compare(y.Sent) })
	used := map[string]GiveBack{}
	for _, g := range gs {
		if !g.Applied {
			continue
		}
		tk, ok := k.Receipts[g.Receipt]
		prev, reused := used[g.Receipt]
		if reused && g.Delta <= tk.Cost && g.User == tk.User && forgotten != nil && forgotten(prev, g) {
			continue
		}
		if g.Receipt == "" || !ok || reused || g.Delta > tk.Cost || g.User != tk.User {
			refused = append(refused, g)
			continue
		}
		used[g.Receipt] = g
		back = append(back, Admission{Sent: g.Sent, Recv: g.Recv, Cost: g.Delta, By: g.By, Door: "adjust"})
	}
	return back, refused
}

// why says why the contract refuses g, a give-back of k answered as
// applied.
func (g GiveBack) why(k *KeyLog) string {
	tk, ok := k.Receipts[g.Receipt]
	what := fmt.Sprintf("a give-back of %d by %s was answered as applied", g.Delta, g.Who)
	switch {
	case g.Receipt == "":
		return what + " without a receipt"
	case !ok:
		return what + fmt.Sprintf(" with receipt %q, of no admitted take on this key (forged or foreign)", g.Receipt)
	case g.Delta > tk.Cost:
		return what + fmt.Sprintf(" with the receipt of a take of %d", tk.Cost)
	case g.User != tk.User:
		return what + fmt.Sprintf(" as user %q, with the receipt of user %q's take", g.User, tk.User)
	}
	return what + fmt.Sprintf(" with receipt %q, used already", g.Receipt)
}
