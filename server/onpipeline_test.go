package server

import (
	"sync"
	"testing"
	"time"
)

// OnPipeline hears of every pipeline once, with its commands read
// together, after the replies are written.
func TestOnPipeline(t *testing.T) {
	var mu sync.Mutex
	var got []int
	var took []time.Duration
	_, addr := start(t, Config{Decider: newFake(10), OnPipeline: func(d time.Duration, n int) {
		mu.Lock()
		got, took = append(got, n), append(took, d)
		mu.Unlock()
	}})
	r := dialRaw(t, addr)
	r.send("*3\r\n$7\r\nRL.TAKE\r\n$1\r\na\r\n$1\r\n1\r\n*3\r\n$7\r\nRL.TAKE\r\n$1\r\nb\r\n$1\r\n1\r\n*1\r\n$4\r\nPING\r\n")
	for range 3 {
		r.readReply()
	}
	r.send("*1\r\n$4\r\nPING\r\n")
	if rep := r.readReply(); rep != "+PONG" {
		t.Fatalf("PING: %q", rep)
	}
	waitFor(t, "two pipelines reported", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 2
	})
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for i, n := range got {
		total += n
		if took[i] <= 0 {
			t.Errorf("pipeline %d: took %v", i, took[i])
		}
	}
	if total != 4 || got[len(got)-1] != 1 {
		t.Errorf("pipelines reported %v commands, want 4 in all, the last one 1", got)
	}
}
