package localredis

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Shard is one shard of a cluster that serves slots, as one node's CLUSTER
// SHARDS tells it: what CLUSTER SLOTS (deprecated since Redis 7.0) told of
// a slot range. The zero value serves no slot.
type Shard struct {
	Slots   []redis.SlotRange
	Primary string   // the primary's address, host:port
	Nodes   []string // the primary's address, then its replicas' but failed ones
}

// Has reports whether s serves slot.
func (s Shard) Has(slot int) bool {
	for _, r := range s.Slots {
		if r.Start <= int64(slot) && int64(slot) <= r.End {
			return true
		}
	}
	return false
}

// ShardsReader is what Shards reads: a *redis.Client asks its node, a
// *redis.ClusterClient a node of its choice.
type ShardsReader interface {
	ClusterShards(ctx context.Context) *redis.ClusterShardsCmd
}

// Shards runs CLUSTER SHARDS on c and returns the shards that serve slots,
// each with the addresses CLUSTER SLOTS would have named: the primary
// whatever its health, and its replicas that are not failed (CLUSTER
// SHARDS also lists a failed node, and a primary with no slot, as one left
// behind by a failover).
func Shards(ctx context.Context, c ShardsReader) ([]Shard, error) {
	shards, err := c.ClusterShards(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("localredis: CLUSTER SHARDS: %w", err)
	}
	var out []Shard
	for _, sh := range shards {
		if len(sh.Slots) == 0 {
			continue
		}
		s := Shard{Slots: sh.Slots}
		var replicas []string
		for _, n := range sh.Nodes {
			switch {
			case n.Role == "master" && s.Primary == "":
				s.Primary = shardNodeAddr(n)
			case n.Role != "master" && n.Health != "fail":
				replicas = append(replicas, shardNodeAddr(n))
			}
		}
		if s.Primary == "" {
			return nil, fmt.Errorf("localredis: CLUSTER SHARDS: slots %v have no primary", sh.Slots)
		}
		s.Nodes = append([]string{s.Primary}, replicas...)
		out = append(out, s)
	}
	return out, nil
}

// shardNodeAddr is n's address as CLUSTER SLOTS gave it to a plain
// connection: the preferred endpoint and the plain port, the TLS port for a
// node that has none.
func shardNodeAddr(n redis.Node) string {
	port := n.Port
	if port == 0 {
		port = n.TLSPort
	}
	return net.JoinHostPort(n.Endpoint, strconv.FormatInt(port, 10))
}
