package app

// The counters the hot-key layer, the deny cache and the RESP server keep
// anyway, as metrics read at scrape time, and the store's observer: the
// tables that join those packages to metrics, which imports none of them.

import (
	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/denycache"
	"github.com/sluice-rl/sluice/hotkey"
	"github.com/sluice-rl/sluice/metrics"
	"github.com/sluice-rl/sluice/server"
)

// storeObserver tells the store's metrics of its round trips and failed
// commands; a decision a node had no room for (cluster.KindOverload) is
// an overload, not an error.
type storeObserver struct{ *metrics.StoreMetrics }

var _ cluster.Observer = storeObserver{}

func (o storeObserver) Error(node, kind string) {
	if kind == cluster.KindOverload {
		o.Overload(node)
		return
	}
	o.StoreMetrics.Error(node, kind)
}

// hotKeyCounters are the hot-key layer's counters.
var hotKeyCounters = []metrics.Counter[hotkey.Stats]{
	{Name: "sluice_hot_keys", Help: "Keys this instance treats as hot now.", Read: func(s hotkey.Stats) int64 { return s.HotKeys }},
	{Name: "sluice_lease_hits_total", Help: "Takes admitted from leased tokens, with no round trip.", Read: func(s hotkey.Stats) int64 { return s.LeaseHits }},
	{Name: "sluice_lease_rejects_total", Help: "Takes rejected by a lease whose shared bucket was empty, with no round trip.", Read: func(s hotkey.Stats) int64 { return s.LeaseRejects }},
	{Name: "sluice_lease_claims_total", Help: "Claims of tokens from a shared bucket into a lease.", Read: func(s hotkey.Stats) int64 { return s.Claims }},
	{Name: "sluice_lease_tokens_claimed_total", Help: "Tokens claimed into leases.", Read: func(s hotkey.Stats) int64 { return s.TokensClaimed }},
	{Name: "sluice_lease_returns_total", Help: "Returns of unused leased tokens to their shared bucket.", Read: func(s hotkey.Stats) int64 { return s.Returns }},
	{Name: "sluice_lease_tokens_returned_total", Help: "Unused leased tokens given back.", Read: func(s hotkey.Stats) int64 { return s.TokensReturned }},
	{Name: "sluice_lease_return_errors_total", Help: "Returns that failed: those tokens are lost until the bucket refills.", Read: func(s hotkey.Stats) int64 { return s.ReturnErrors }},
	{Name: "sluice_split_decisions_total", Help: "Takes decided by a sub-bucket of a split hot key.", Read: func(s hotkey.Stats) int64 { return s.SplitDecisions }},
	{Name: "sluice_split_retries_total", Help: "Split takes that tried a second sub-bucket.", Read: func(s hotkey.Stats) int64 { return s.SplitRetries }},
	{Name: "sluice_split_handoffs_total", Help: "Hand-overs (each try) of a key's budget to its sub-buckets as it turned hot.", Read: func(s hotkey.Stats) int64 { return s.SplitHandoffs }},
}

// denyCounters are the deny cache's counters.
var denyCounters = []metrics.Counter[denycache.Stats]{
	{Name: "sluice_deny_cache_entries", Help: "Refusals held in the deny cache (expired ones until replaced or evicted; at most 65,536).", Read: func(s denycache.Stats) int64 { return s.Entries }},
	{Name: "sluice_deny_cache_hits_total", Help: "Requests refused from the deny cache, with no round trip (decided_by deny-cache).", Read: func(s denycache.Stats) int64 { return s.Hits }},
	{Name: "sluice_deny_cache_added_total", Help: "Refusals of the store put in the deny cache.", Read: func(s denycache.Stats) int64 { return s.Added }},
}

// serverCounters are the RESP server's counters.
var serverCounters = []metrics.Counter[server.Stats]{
	{Name: "sluice_connected_clients", Help: "Client connections open now.", Read: func(s server.Stats) int64 { return s.ConnectedClients }},
	{Name: "sluice_connections_total", Help: "Client connections accepted.", Read: func(s server.Stats) int64 { return s.TotalConnections }},
	{Name: "sluice_rejected_connections_total", Help: "Client connections refused over --max-clients.", Read: func(s server.Stats) int64 { return s.RejectedClients }},
	{Name: "sluice_commands_total", Help: "RESP commands processed.", Read: func(s server.Stats) int64 { return s.CommandsProcessed }},
	{Name: "sluice_error_replies_total", Help: "RESP error replies sent, protocol errors included.", Read: func(s server.Stats) int64 { return s.ErrorReplies }},
	{Name: "sluice_panics_total", Help: "Panics recovered in a command handler: each one is a bug.", Read: func(s server.Stats) int64 { return s.Panics }},
}
