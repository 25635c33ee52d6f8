package app

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/metrics"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/region"
	"github.com/sluice-rl/sluice/server"
)

// openRegion wraps the regional store in the region layer when --region
// is set; otherwise it returns nil, and says so if the config has global
// policies (they are then decided by the store alone, as one budget).
func openRegion(c *Config, store limit.Store, set *policy.Set, pols policies, log *slog.Logger) (*region.Layer, *cluster.Store, error) {
	if c.Region == "" {
		for _, p := range set.Policies {
			if p.Global() {
				log.Warn("scope: global policy without --region: decided by this instance's store alone, as one global budget", "policy", p.Name)
			}
		}
		return nil, nil, nil
	}
	cfg := cluster.Config{Timeout: c.HomeTimeout, Observer: nil}
	if c.HomeCluster != "" {
		cfg.Addrs = strings.Split(c.HomeCluster, ",")
	} else {
		cfg.URL = c.HomeRedis
		if !strings.Contains(cfg.URL, "://") {
			cfg.URL = "redis://" + cfg.URL
		}
	}
	home, err := c.newStore(cfg, &c.Home)
	if err != nil {
		return nil, nil, fmt.Errorf("serve: home store: %w", err)
	}
	l, err := region.New(store, region.Config{Region: c.Region, Home: home, Tick: c.RegionTick, HomeTimeout: c.HomeTimeout, Match: pols.Match, Policies: func() region.PolicySet { return pols.h.Current() }})
	if err != nil {
		home.Close()
		return nil, nil, err
	}
	// No secret in a log line: the home URL without its password.
	log.Info("region", "name", c.Region, "home", c.HomeCluster+redactURL(cfg.URL), "tick", c.RegionTick, "home_timeout", c.HomeTimeout)
	return l, home, nil
}

// regionLines answers RL.REGIONS.
func regionLines(l *region.Layer) func() []server.Region {
	if l == nil {
		return nil
	}
	return func() []server.Region {
		rs := l.Regions()
		out := make([]server.Region, len(rs))
		for i, r := range rs {
			out[i] = server.Region{Name: r.Name, Self: r.Self, Keys: r.Keys, Held: r.Held, Claimed: r.Claimed,
				Returned: r.Returned, Demand: r.Demand, LastHomeContact: r.LastContact}
		}
		return out
	}
}

// writeRegionInfo appends INFO's # Region section.
func writeRegionInfo(w io.Writer, l *region.Layer) {
	if l == nil {
		return
	}
	s := l.Snapshot()
	last := int64(-1)
	if !s.LastHomeContact.IsZero() {
		last = s.LastHomeContact.UnixMilli()
	}
	fmt.Fprintf(w, "# Region\r\nregion:%s\r\nregion_keys:%d\r\nregion_home_reachable:%d\r\nregion_home_rtt_us:%d\r\nregion_last_home_contact_ms:%d\r\n"+
		"region_claims:%d\r\nregion_tokens_claimed:%d\r\nregion_tokens_returned:%d\r\nregion_tokens_debited:%d\r\nregion_tokens_lost:%d\r\n"+
		"region_pool_admitted:%d\r\nregion_floor_admitted:%d\r\nregion_home_errors:%d\r\nregion_home_outages:%d\r\nregion_untracked:%d\r\nregion_retired:%d\r\n",
		s.Region, s.Keys, b2i(s.HomeReachable), s.HomeRTT.Microseconds(), last,
		s.Claims, s.Claimed, s.Returned, s.Debited, s.Lost, s.PoolAdmitted, s.FloorAdmitted, s.HomeErrors, s.HomeOutages, s.Untracked, s.Retired)
	for _, r := range l.Regions() {
		fmt.Fprintf(w, "region_%s:self=%d,keys=%d,held=%d,claimed=%d,returned=%d,demand=%.1f,last_home_contact_ms=%d\r\n",
			r.Name, b2i(r.Self), r.Keys, r.Held, r.Claimed, r.Returned, r.Demand, r.LastContact)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// collectRegion registers the region's metrics, read at scrape time.
func collectRegion(m *metrics.Metrics, l *region.Layer) error {
	if l == nil {
		return nil
	}
	labels := prometheus.Labels{"region": l.Name()}
	if err := metrics.CollectSnapshot(m, labels, l.Snapshot, []metrics.Counter[region.Stats]{
		{Name: "sluice_region_tokens_claimed_total", Help: "Tokens this instance claimed from the home store into its region's pools.", Read: func(s region.Stats) int64 { return s.Claimed }},
		{Name: "sluice_region_tokens_returned_total", Help: "Tokens this instance gave back to the home store from pools that went quiet.", Read: func(s region.Stats) int64 { return s.Returned }},
		{Name: "sluice_region_tokens_debited_total", Help: "Floor admissions debited from the global bucket once home answered.", Read: func(s region.Stats) int64 { return s.Debited }},
		{Name: "sluice_region_tokens_lost_total", Help: "Tokens claimed or drained that reached neither a pool nor home (under-admission, never over).", Read: func(s region.Stats) int64 { return s.Lost }},
		{Name: "sluice_region_pool_admitted_total", Help: "Tokens admitted from the region's pools.", Read: func(s region.Stats) int64 { return s.PoolAdmitted }},
		{Name: "sluice_region_floor_admitted_total", Help: "Tokens admitted by region_floor while the region had no allocation to wait for.", Read: func(s region.Stats) int64 { return s.FloorAdmitted }},
		{Name: "sluice_region_home_errors_total", Help: "Calls to the home store that failed.", Read: func(s region.Stats) int64 { return s.HomeErrors }},
	}); err != nil {
		return err
	}
	gauges := []struct {
		name, help string
		v          func() float64
	}{
		{"sluice_region_home_reachable", "1 while the home store answers, 0 while this region decides alone.", func() float64 { return float64(b2i(l.Snapshot().HomeReachable)) }},
		{"sluice_region_home_last_contact_seconds", "Unix time of the home store's last answer (0: never).", func() float64 {
			if t := l.Snapshot().LastHomeContact; !t.IsZero() {
				return float64(t.UnixNano()) / 1e9
			}
			return 0
		}},
		{"sluice_region_held_tokens", "Tokens in this region's pools, as this instance last saw them.", func() float64 { return float64(l.Regions()[0].Held) }},
		{"sluice_region_demand_tokens_per_second", "Tokens asked of this instance per second for global keys, smoothed.", func() float64 { return l.Regions()[0].Demand }},
	}
	for _, g := range gauges {
		if err := m.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: g.name, Help: g.help, ConstLabels: labels}, g.v)); err != nil {
			return err
		}
	}
	return nil
}
