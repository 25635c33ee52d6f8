package bench

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// sluiceCounters are the counters of sluice's INFO that a step reads.
type sluiceCounters struct {
	decisions, allowed, rejected int64
	// connections is total_connections_received, connected
	// connected_clients.
	connections, connected int64
	// by counts decisions by decided_by path ("fallback-open"), from the
	// decided_by_* lines; node sums each integer field of the node_ lines
	// ("breaker_opens", "overload") over the nodes.
	by, node map[string]int64
	// durations is the INFO line request_duration_us: sluice's own time
	// per request, cumulative counts by upper bound in µs (le_inf last,
	// as -1).
	durations map[int64]int64
}

// parseSluiceInfo reads sluiceCounters from the text of sluice's INFO.
// decided_by_fallback_open counts the path fallback-open (INFO names
// cannot hold '-'); a node line reads
// node_<host:port>:breaker=closed,…,overload=N,breaker_opens=N,…, so it
// is split at ',' and '=', not by infoFields, which would key every node
// by its host. Fields that are not integers (avg_batch=1.50) are skipped.
func parseSluiceInfo(text string) (sluiceCounters, error) {
	c := sluiceCounters{by: map[string]int64{}, node: map[string]int64{}, durations: map[int64]int64{}}
	f := infoFields(text)
	for _, v := range []struct {
		name string
		dst  *int64
	}{
		{"decisions", &c.decisions}, {"allowed", &c.allowed}, {"rejected", &c.rejected},
		{"total_connections_received", &c.connections}, {"connected_clients", &c.connected},
	} {
		n, err := strconv.ParseInt(f[v.name], 10, 64)
		if err != nil {
			return c, fmt.Errorf("sluice INFO: %s is %q, want an integer", v.name, f[v.name])
		}
		*v.dst = n
	}
	for name, val := range f {
		if path, ok := strings.CutPrefix(name, "decided_by_"); ok {
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				return c, fmt.Errorf("sluice INFO: %s is %q, want an integer", name, val)
			}
			c.by[strings.ReplaceAll(path, "_", "-")] = n
		}
	}
	for line := range strings.SplitSeq(text, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "request_duration_us:"); ok {
			for field := range strings.SplitSeq(rest, ",") {
				name, val, _ := strings.Cut(field, "=")
				n, err := strconv.ParseInt(val, 10, 64)
				bound, ok := strings.CutPrefix(name, "le_")
				if err != nil || !ok {
					return c, fmt.Errorf("sluice INFO: request_duration_us field %q", field)
				}
				le := int64(-1)
				if bound != "inf" {
					if le, err = strconv.ParseInt(bound, 10, 64); err != nil {
						return c, fmt.Errorf("sluice INFO: request_duration_us bound %q", bound)
					}
				}
				c.durations[le] = n
			}
			continue
		}
		if !strings.HasPrefix(line, "node_") {
			continue
		}
		for field := range strings.SplitSeq(strings.TrimSpace(line), ",") {
			name, val, _ := strings.Cut(field, "=")
			if n, err := strconv.ParseInt(val, 10, 64); err == nil {
				c.node[name] += n
			}
		}
	}
	return c, nil
}

// minus is the counters' change since before; a path or field absent
// from before counts from 0, and one that is 0 after is left out.
func (c sluiceCounters) minus(before sluiceCounters) sluiceCounters {
	sub := func(a, b map[string]int64) map[string]int64 {
		out := map[string]int64{}
		for k, v := range a {
			if d := v - b[k]; d != 0 {
				out[k] = d
			}
		}
		return out
	}
	return sluiceCounters{
		decisions: c.decisions - before.decisions, allowed: c.allowed - before.allowed,
		rejected: c.rejected - before.rejected, connections: c.connections - before.connections,
		connected: c.connected, by: sub(c.by, before.by), node: sub(c.node, before.node),
		durations: sub64(c.durations, before.durations),
	}
}

func sub64(a, b map[int64]int64) map[int64]int64 {
	out := map[int64]int64{}
	for k, v := range a {
		out[k] = v - b[k]
	}
	return out
}

// ownQuantile is the upper bound, in ms, of the histogram bucket that holds
// quantile q of the durations (cumulative counts by bound in µs, -1 for
// +Inf): sluice's own time per request, as /metrics would say it. It is
// NaN without samples and +Inf when the quantile lies past the last bound.
func ownQuantile(durations map[int64]int64, q float64) float64 {
	total := durations[-1]
	if total <= 0 {
		return math.NaN()
	}
	bounds := make([]int64, 0, len(durations))
	for le := range durations {
		if le >= 0 {
			bounds = append(bounds, le)
		}
	}
	slices.Sort(bounds)
	for _, le := range bounds {
		if float64(durations[le]) >= q*float64(total) {
			return float64(le) / 1000
		}
	}
	return math.Inf(1)
}
