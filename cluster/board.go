package cluster

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// BoardPrefix starts the Redis key of a global key's demand board in the
// home store. User keys always map under Prefix ("sluice:"), so no user
// key lands on a board.
const BoardPrefix = "sluice-regions:"

// BoardKey returns the Redis key of user key's demand board: in the slot
// of the key's bucket (so a board and its bucket live on one node) except
// for a key with a '}' and no hash tag, whose bucket hashes on its whole
// Redis key.
func BoardKey(user string) string { return BoardPrefix + strings.TrimPrefix(Key(user), Prefix) }

// Exchange is the demand board of package region. For each keys[i] it
// deletes the fields drop[i] (nil: none), sets field to values[i], makes
// the board expire ttl after this write, and reads every field back; all
// in one pipeline per node. A connectivity failure comes back as a
// *limit.UnavailableError. It is a background call (never on a request's
// path), so it goes by go-redis's own routing rather than the batches.
func (s *Store) Exchange(ctx context.Context, keys []string, field string, values []string, drop [][]string, ttl time.Duration) ([]map[string]string, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	var c redis.Cmdable = s.single
	if s.cc != nil {
		c = s.cc
	}
	reads := make([]*redis.MapStringStringCmd, len(keys))
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			bk := BoardKey(k)
			if i < len(drop) && len(drop[i]) > 0 {
				p.HDel(ctx, bk, drop[i]...)
			}
			p.HSet(ctx, bk, field, values[i])
			p.PExpire(ctx, bk, ttl)
			reads[i] = p.HGetAll(ctx, bk)
		}
		return nil
	})
	if err != nil {
		if isConnectivity(err) {
			return nil, s.unavailable("", err)
		}
		return nil, err
	}
	out := make([]map[string]string, len(keys))
	for i, r := range reads {
		out[i] = r.Val()
	}
	return out, nil
}
