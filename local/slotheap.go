package local

// slot is one held slot of a SlotState: its token, its expiry (µs) and
// its place in each of the state's two heaps.
type slot struct {
	token string
	exp   int64
	at    [2]int // index in heaps[early] and heaps[late]
}

// The two heaps of a SlotState: by earliest expiry (the next slot to free
// itself, retry_after) and by latest (reset_after).
const (
	early = 0
	late  = 1
)

// slotHeap is a binary heap of slots ordered by expiry: the earliest on
// top (which == early) or the latest (which == late). Every slot knows
// its index, so that one can be removed or moved in O(log n).
type slotHeap struct {
	s     []*slot
	which int
}

// before reports whether slot a belongs above slot b.
func (h *slotHeap) before(a, b *slot) bool {
	if h.which == early {
		return a.exp < b.exp
	}
	return a.exp > b.exp
}

func (h *slotHeap) swap(i, j int) {
	h.s[i], h.s[j] = h.s[j], h.s[i]
	h.s[i].at[h.which], h.s[j].at[h.which] = i, j
}

// up moves the slot at i up to its place; it counts the slots it looks at
// in *visits.
func (h *slotHeap) up(i int, visits *int64) {
	for i > 0 {
		parent := (i - 1) / 2
		*visits++
		if !h.before(h.s[i], h.s[parent]) {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

// down moves the slot at i down to its place and reports whether it moved.
func (h *slotHeap) down(i int, visits *int64) bool {
	start := i
	n := len(h.s)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		*visits++
		if r := c + 1; r < n {
			*visits++
			if h.before(h.s[r], h.s[c]) {
				c = r
			}
		}
		if !h.before(h.s[c], h.s[i]) {
			break
		}
		h.swap(i, c)
		i = c
	}
	return i > start
}

func (h *slotHeap) push(x *slot, visits *int64) {
	x.at[h.which] = len(h.s)
	h.s = append(h.s, x)
	h.up(len(h.s)-1, visits)
}

// remove takes the slot at i out of the heap.
func (h *slotHeap) remove(i int, visits *int64) {
	last := len(h.s) - 1
	if i != last {
		h.swap(i, last)
	}
	h.s[last] = nil
	h.s = h.s[:last]
	if i != last {
		h.fix(i, visits)
	}
}

// fix restores the heap after the expiry of the slot at i changed.
func (h *slotHeap) fix(i int, visits *int64) {
	if !h.down(i, visits) {
		h.up(i, visits)
	}
}

// top is the slot on top; the heap must not be empty.
func (h *slotHeap) top() *slot { return h.s[0] }
