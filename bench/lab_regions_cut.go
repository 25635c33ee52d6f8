package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-rl/sluice/internal/delayproxy"
)

// cutOff runs the cut-off phase on the per-region setup's processes: a
// fresh key under 70/30 load for Settle, eu cut off from home for Cut,
// then After with home back.
func (rep *RegionsLabReport) cutOff(ctx context.Context, rig *rig, w *regionsWorld, loads []regionLoad, key string) error {
	c := rep.Config
	eu := regionsLabNames[0]
	k := &regionsCut{c: c, rig: rig, link: w.home.Link(eu), loads: loads, key: key,
		cut: RegionsLabCut{Region: eu, Mode: c.CutMode, Settle: c.Settle, Cut: c.Cut, After: c.After,
			FloorLimit: c.Floor * float64(c.Limit), FloorRate: c.Floor * float64(c.Rate)}}
	k.cut.FloorBound = k.cut.FloorLimit + k.cut.FloorRate*c.Cut.Seconds()
	for i := range loads {
		loads[i].after = loads[i].before // no shift
	}
	events := []event{
		{after: c.Settle, do: func() { k.begin(ctx) }},
		{after: c.Settle + c.Cut, do: func() { k.end(ctx) }},
	}
	total := c.Settle + c.Cut + c.After
	rig.logf("[4/4] %s cut off: %v of load (70/30), %s cut off from home for %v after %v", RegionsAsync, total, eu, c.Cut, c.Settle)
	res := drivePaced(ctx, rep.spec(key, loads, total, 0, events))
	if len(k.errs) > 0 {
		return rig.errorf("cut-off: %w", k.errs[0])
	}
	if k.cutAt.IsZero() || k.endAt.IsZero() {
		return rig.errorf("cut-off: the load ended before the cut did (%v)", ctx.Err())
	}
	last, err := readRegions(ctx, loads[0])
	if err != nil {
		return rig.errorf("cut-off: %w", err)
	}
	k.fill(res, last)
	cut := k.cut
	rep.Cut = cut
	rig.logf("[4/4] cut off: %s admitted %d of %d sent during the cut (pool %d, floor %d) against floor %.0f + held %d; %s admitted %d of a refill of %.0f; errors %d; 2 s before %d, 2 s after %d (fair %.0f); debited %d; home reachable again after %v",
		eu, cut.Admitted, cut.Sent, cut.PoolAdmitted, cut.FloorAdmitted, cut.FloorBound, cut.HeldAtCut, regionsLabNames[1], cut.Other, cut.OtherBudget,
		cut.Errors, cut.Before, cut.AfterReturn, cut.Fair, cut.Debited, cut.HomeReachableAgain.Round(time.Millisecond))
	return nil
}

// regionsCut is one cut-off phase: eu's link to home, the loads, what the
// events read (eu's counters at the cut and at its end) and the errors
// they met, and the cut's row as it fills.
type regionsCut struct {
	c     RegionsLabConfig
	rig   *rig
	link  delayproxy.Links
	loads []regionLoad
	key   string
	cut   RegionsLabCut

	mu           sync.Mutex
	errs         []error
	atCut, atEnd []regionInfo
	cutAt, endAt time.Time
}

func (k *regionsCut) fail(err error) {
	k.mu.Lock()
	k.errs = append(k.errs, err)
	k.mu.Unlock()
}

// set cuts eu off from home (on) or lets it through again, as CutMode says.
func (k *regionsCut) set(on bool) {
	if k.c.CutMode == "reset" {
		k.link.Cut(on)
	} else {
		k.link.Stall(on)
	}
}

// begin is the cut: eu's counters and what its pool of the key holds
// are read, then eu is cut off.
func (k *regionsCut) begin(ctx context.Context) {
	var err error
	if k.atCut, err = readRegions(ctx, k.loads[0]); err != nil {
		k.fail(err)
	}
	// What eu's pool of this key holds: RL.PEEK of a global
	// key reads the region's pool while home answers (it
	// reports the floor only when the region decides alone);
	// RL.REGIONS sums every key's.
	for _, cl := range k.loads[0].clients {
		v, err := cl.Do(ctx, "RL.PEEK", k.key).Slice()
		if err == nil {
			err = checkTake(v)
		}
		if err != nil {
			k.fail(fmt.Errorf("RL.PEEK %s: %w", k.key, err))
			break
		}
		k.cut.HeldAtCut = max(k.cut.HeldAtCut, v[2].(int64))
	}
	k.set(true)
	k.cutAt = time.Now()
	k.rig.logf("      %s cut off from home (%s)", k.cut.Region, k.c.CutMode)
}

// end lets eu reach home again, its counters read first, and times how
// long until eu says home answers again, polled while the load goes on.
func (k *regionsCut) end(ctx context.Context) {
	var err error
	if k.atEnd, err = readRegions(ctx, k.loads[0]); err != nil {
		k.fail(err)
	}
	k.set(false)
	k.endAt = time.Now()
	k.rig.logf("      %s reaches home again", k.cut.Region)
	k.cut.HomeReachableAgain = -1
	_ = poll(ctx, 20*time.Millisecond, k.c.After-100*time.Millisecond, func() (bool, error) {
		ri, err := readRegion(ctx, k.loads[0].clients[0])
		if err == nil && ri.fields["region_home_reachable"] == "1" {
			k.cut.HomeReachableAgain = time.Since(k.endAt)
			return true, nil
		}
		return false, nil
	})
}

// fill computes the cut's row from the load's tallies and eu's counters
// (last: once the load is over).
func (k *regionsCut) fill(res pacedResult, last []regionInfo) {
	c, cut := k.c, &k.cut
	t, o := res.regions[0], res.regions[1]
	cut.Sent = t.sentBetween(res.bin, c.Settle, c.Settle+c.Cut)
	cut.Admitted = t.admittedBetween(res.bin, c.Settle, c.Settle+c.Cut)
	cut.PoolAdmitted = sumInfo(k.atEnd, "region_pool_admitted") - sumInfo(k.atCut, "region_pool_admitted")
	cut.FloorAdmitted = sumInfo(k.atEnd, "region_floor_admitted") - sumInfo(k.atCut, "region_floor_admitted")
	cut.Debited = sumInfo(last, "region_tokens_debited") - sumInfo(k.atCut, "region_tokens_debited")
	cut.Other = o.admittedBetween(res.bin, c.Settle, c.Settle+c.Cut)
	cut.OtherBudget = float64(c.Rate) * c.Cut.Seconds()
	cut.Before = t.admittedBetween(res.bin, c.Settle-regionsAfterWindow, c.Settle)
	cut.AfterReturn = t.admittedBetween(res.bin, c.Settle+c.Cut, c.Settle+c.Cut+regionsAfterWindow)
	cut.Fair = regionsLabBefore[0] * float64(c.Rate) * regionsAfterWindow.Seconds()
	cut.Regions = regionLines(res)
	for _, g := range cut.Regions {
		cut.Errors += g.Errors
		if cut.FirstError == "" {
			cut.FirstError = g.FirstError
		}
	}
}

// sumInfo sums one INFO counter over infos.
func sumInfo(infos []regionInfo, name string) int64 {
	var n int64
	for _, ri := range infos {
		n += ri.int(name)
	}
	return n
}
