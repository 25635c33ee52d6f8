package hotkey

// The lease caches (golang-lru/v2, bounded) evict a lease on capacity,
// on expiry and on Close; its unused tokens then go back to the key's
// bucket, by the expiry goroutine (returns.go).

// evicted is the lease caches' eviction callback (capacity, expiry, Close):
// the lease is dead from now on and its tokens go back, unless a claim is in
// flight, whose answer gives them back instead.
func (h *Layer) evicted(_ string, l *lease) {
	l.mu.Lock()
	l.dead = true
	back, epoch := l.held, l.epoch
	l.held = 0
	if l.dropped {
		back = 0
	}
	l.mu.Unlock()
	h.giveBack(l, back, epoch)
}

// expire drops the leases whose tokens have gone unused for the lease TTL.
func (h *Layer) expire(ns int64) {
	for _, c := range h.leases {
		for _, k := range c.Keys() {
			l, ok := c.Peek(k)
			if !ok {
				continue
			}
			l.mu.Lock()
			old := l.claiming == nil && ns >= l.expires
			l.mu.Unlock()
			if old {
				c.Remove(k) // calls evicted
			}
		}
	}
}
