package region

import (
	"sort"
	"sync/atomic"
	"time"
)

// stats are the Layer's counters.
type stats struct {
	claims        atomic.Int64 // claims home answered
	claimed       atomic.Int64 // tokens claimed into the pools
	returned      atomic.Int64 // tokens given back to home
	debited       atomic.Int64 // floor admissions debited at home
	lost          atomic.Int64 // tokens claimed or drained that reached neither pool nor home
	poolAdmitted  atomic.Int64 // tokens admitted from the pools
	floorAdmitted atomic.Int64 // tokens admitted by the floor
	homeErrors    atomic.Int64 // calls to home that failed
	homeOutages   atomic.Int64 // times home went from answering to failing
	untracked     atomic.Int64 // requests of keys past MaxKeys
	retired       atomic.Int64 // keys forgotten because their policy stopped being global
	trimmed       atomic.Int64 // stale pool tokens given back as beyond the bound (stale.go)
}

// Region is one line of RL.REGIONS: this instance's own region from its
// own counters, the others from the demand boards of the keys it shares
// with them. LastContact is unix ms of the last word from home (own
// region) or from the region on a board; -1 never.
type Region struct {
	Name              string
	Self              bool
	Keys              int     // global keys tracked (own region) or seen on boards
	Held              int64   // tokens in the region's pools, as last seen
	Claimed, Returned int64   // tokens
	Demand            float64 // tokens/s
	LastContact       int64
}

// Regions returns this region first, then the others in name order.
func (l *Layer) Regions() []Region {
	self := Region{Name: l.region, Self: true, LastContact: -1}
	if ns := l.lastContact.Load(); ns > 0 {
		self.LastContact = ns / int64(time.Millisecond)
	}
	l.keys.Range(func(_, v any) bool {
		e := v.(*entry)
		self.Keys++
		self.Held += e.pool.Load()
		self.Claimed += e.claimed.Load()
		self.Returned += e.returned.Load()
		self.Demand += e.Demand()
		return true
	})
	out := []Region{self}
	if m := l.others.Load(); m != nil {
		for _, r := range *m {
			out = append(out, *r)
		}
	}
	sort.Slice(out[1:], func(i, j int) bool { return out[1+i].Name < out[1+j].Name })
	return out
}

// Stats is a snapshot of the Layer's counters, for INFO and /metrics.
type Stats struct {
	Region                                   string
	Keys                                     int64
	Claims, Claimed, Returned, Debited, Lost int64
	PoolAdmitted, FloorAdmitted              int64
	HomeErrors, HomeOutages, Untracked       int64
	Retired                                  int64 // keys whose policy stopped being global
	Trimmed                                  int64 // stale pool tokens given back as beyond the bound (part of Returned)
	HomeReachable                            bool
	HomeRTT                                  time.Duration
	LastHomeContact                          time.Time // zero: never
}

// Snapshot returns the counters.
func (l *Layer) Snapshot() Stats {
	s := Stats{
		Region: l.region, Keys: l.nkeys.Load(),
		Claims: l.st.claims.Load(), Claimed: l.st.claimed.Load(), Returned: l.st.returned.Load(),
		Debited: l.st.debited.Load(), Lost: l.st.lost.Load(),
		PoolAdmitted: l.st.poolAdmitted.Load(), FloorAdmitted: l.st.floorAdmitted.Load(),
		HomeErrors: l.st.homeErrors.Load(), HomeOutages: l.st.homeOutages.Load(), Untracked: l.st.untracked.Load(),
		Retired: l.st.retired.Load(), Trimmed: l.st.trimmed.Load(), HomeReachable: l.HomeReachable(l.now().UnixNano()), HomeRTT: time.Duration(l.rtt.Load()),
	}
	if ns := l.lastContact.Load(); ns > 0 {
		s.LastHomeContact = time.Unix(0, ns)
	}
	return s
}
