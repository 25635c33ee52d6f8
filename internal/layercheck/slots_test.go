package layercheck

import (
	"testing"
	"time"
)

func TestCheckSlots(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	holds := []Hold{
		{SentA: ms(0), RecvA: ms(1), TTL: time.Second, SentR: ms(10)},
		{SentA: ms(9), RecvA: ms(10), TTL: time.Second, SentR: ms(20)},   // opens as the first is released: not both
		{SentA: ms(5), RecvA: ms(12), TTL: 5 * time.Millisecond},         // expired (sent + TTL = 10) before it was answered: never certain
		{SentA: ms(11), RecvA: ms(13), TTL: 100 * time.Millisecond},      // never released: held to 111
		{SentA: ms(14), RecvA: ms(15), TTL: time.Second, SentR: ms(200)}, // overlaps the second and the fourth
	}
	if most, at := CheckSlots(holds); most != 3 || !at.Equal(ms(15)) {
		t.Fatalf("got %d at %v, want 3 at +15ms", most, at.Sub(t0))
	}
	if most, _ := CheckSlots(holds[:2]); most != 1 {
		t.Fatalf("a release and an acquire at one instant: %d, want 1", most)
	}
}
