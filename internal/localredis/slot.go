package localredis

import "github.com/sluice-rl/sluice/internal/keyslot"

// SlotCount is the number of hash slots of a Redis Cluster.
const SlotCount = keyslot.Count

// Slot returns the cluster hash slot of key, as CLUSTER KEYSLOT does.
func Slot(key string) int { return keyslot.Slot(key) }
