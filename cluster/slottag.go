package cluster

import (
	"strconv"
	"sync"

	"github.com/sluice-rl/sluice/internal/keyslot"
)

// slotTags[s] is the least decimal number whose text hashes to slot s,
// found once, when a receipt key is first made: the numbers below 109,758
// cover every slot, a few ms of CRC16 (6 ms measured on a loaded 2-core
// machine).
var (
	slotTagsOnce sync.Once
	slotTags     [keyslot.Count]uint32
)

// slotTag returns a hash tag that puts a key on slot s: the decimal text
// of the least number that Redis hashes to s. It never holds '{' or '}'.
func slotTag(s int) string {
	slotTagsOnce.Do(func() {
		left := keyslot.Count
		var found [keyslot.Count]bool
		for n := uint32(0); left > 0; n++ {
			if sl := keyslot.Slot(strconv.FormatUint(uint64(n), 10)); !found[sl] {
				found[sl], slotTags[sl] = true, n
				left--
			}
		}
	})
	return strconv.FormatUint(uint64(slotTags[s]), 10)
}
