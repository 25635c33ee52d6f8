package app

import "github.com/sluice-rl/sluice/limit"

// slotStore is the store of RL.ACQUIRE's slots: the store itself, under
// the region layer (a concurrency policy is never global), or nil when it
// holds none.
func slotStore(s limit.Store) limit.SlotStore {
	ss, _ := s.(limit.SlotStore)
	return ss
}
