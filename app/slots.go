package app

import (
	"fmt"
	"io"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/metrics"
)

// slotStore is the store of RL.ACQUIRE's slots: the store itself, under
// the region layer (a concurrency policy is never global), or nil when it
// holds none.
func slotStore(s limit.Store) limit.SlotStore {
	ss, _ := s.(limit.SlotStore)
	return ss
}

// writeSlotInfo appends RL.ACQUIRE's and RL.RELEASE's lines to INFO's
// # Sluice section.
func writeSlotInfo(w io.Writer, lim *limiter.Limiter) {
	s := lim.SlotSnapshot()
	fmt.Fprintf(w, "slot_acquires:%d\r\nslot_acquired:%d\r\nslot_releases:%d\r\nslot_released:%d\r\n", s.Acquires, s.Acquired, s.Releases, s.Released)
	fmt.Fprintf(w, "slot_over_fallback:%d\r\nslot_orphans:%d\r\nslot_orphans_freed:%d\r\nslot_orphans_dropped:%d\r\n", s.OverFallback, s.Orphans, s.OrphansFreed, s.OrphansDropped)
}

// collectSlots registers the slot counters for /metrics.
func collectSlots(m *metrics.Metrics, lim *limiter.Limiter) error {
	return metrics.CollectSnapshot(m, nil, lim.SlotSnapshot, []metrics.Counter[limiter.SlotSnapshot]{
		{Name: "sluice_slot_acquires_total", Help: "RL.ACQUIRE decisions (concurrency policies), admitted or refused.", Read: func(s limiter.SlotSnapshot) int64 { return s.Acquires }},
		{Name: "sluice_slot_acquired_total", Help: "RL.ACQUIRE decisions that took a slot.", Read: func(s limiter.SlotSnapshot) int64 { return s.Acquired }},
		{Name: "sluice_slot_releases_total", Help: "RL.RELEASE calls answered.", Read: func(s limiter.SlotSnapshot) int64 { return s.Releases }},
		{Name: "sluice_slot_released_total", Help: "RL.RELEASE calls that freed a held slot (the rest named an unknown or expired token).", Read: func(s limiter.SlotSnapshot) int64 { return s.Released }},
		{Name: "sluice_slot_over_fallback_total", Help: "RL.ACQUIRE decisions the store admitted but refused for the slots the fallback holds.", Read: func(s limiter.SlotSnapshot) int64 { return s.OverFallback }},
		{Name: "sluice_slot_orphans_total", Help: "Slots the store may hold that no caller knows of (an acquire that timed out, or was refused for the fallback's slots), queued for release.", Read: func(s limiter.SlotSnapshot) int64 { return s.Orphans }},
		{Name: "sluice_slot_orphans_freed_total", Help: "Orphan slots released in the store, found free, or expired.", Read: func(s limiter.SlotSnapshot) int64 { return s.OrphansFreed }},
		{Name: "sluice_slot_orphans_dropped_total", Help: "Orphan slots given up after bounded retries (each frees itself by its TTL).", Read: func(s limiter.SlotSnapshot) int64 { return s.OrphansDropped }},
	})
}
