package layercheck

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"pgregory.net/rapid"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/keyslot"
	"github.com/sluice-rl/sluice/limit"
)

// What an operation's answer means under faults: an unknown outcome (its
// process was being killed), a tolerated "store unavailable" (sent again),
// or a finding.

// unknownOutcome reports (and counts) whether err, of an operation on p in
// [sent, recv], is its connection failing while p was being killed: the
// operation may or may not have been done, so it is booked nowhere. The
// window runs redialBackoff past the restart: a go-redis pool whose dials
// failed answers its last dial error, without dialling, until a
// background dial succeeds (about a second): such a request never left
// the client.
func (w *world) unknownOutcome(p *proc, sent, recv time.Time, err error) bool {
	n := w.nem
	if n == nil || err == nil || !connectionError(err) || !n.within([]string{FaultSluiceKill}, p.name, sent, recv, redialBackoff) {
		return false
	}
	n.mu.Lock()
	n.unknown++
	n.mu.Unlock()
	return true
}

// redialBackoff is how long after a killed sluice answers again its
// clients may still answer the failed dials' error (go-redis retries a
// failed pool's dial once a second), with margin.
const redialBackoff = 2 * time.Second

// storeUnavailable reports (and counts) whether err is "store
// unavailable", answered to cmd in [sent, recv] during a store fault.
func (w *world) storeUnavailable(cmd string, sent, recv time.Time, err error) bool {
	n := w.nem
	if n == nil || err == nil || !unavailable(err) || !n.during(storeKinds, "", sent, recv) {
		return false
	}
	n.mu.Lock()
	n.tolerated[cmd]++
	n.mu.Unlock()
	return true
}

// connectionError reports whether err is a connection's failure (reset,
// refused, closed, EOF; gRPC Unavailable), not an error reply.
func connectionError(err error) bool {
	var re redis.Error
	if errors.As(err, &re) || isHTTPStatus(err) {
		return false
	}
	if s, ok := status.FromError(err); ok && s.Code() != codes.Unknown {
		return s.Code() == codes.Unavailable
	}
	if strings.Contains(err.Error(), "code = Unavailable") {
		return true // the rival's answers, kept as text
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "connection reset") ||
		strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "use of closed network connection")
}

// opError books an operation's error: nothing when its outcome is unknown
// (its process was being killed); a finding of category cat (the contract:
// every command is answered, during store faults by the fallback) when
// the run records findings; else the test fails. The action stops there
// either way.
func (it *iteration) opError(t interface {
	Fatalf(string, ...any)
	Logf(string, ...any)
}, p *proc, sent, recv time.Time, err error, format string, args ...any) {
	if it.w.unknownOutcome(p, sent, recv, err) {
		t.Logf("unknown outcome (%s being killed): "+format+": %v", append(append([]any{p.name}, args...), err)...)
		return
	}
	what := fmt.Sprintf(format, args...)
	if it.w.nem != nil && it.w.keepGoing {
		cmd := strings.Fields(what)[0]
		fault := "no fault"
		if it.w.nem.during(FaultKinds, "", sent, recv) {
			fault = "during a fault"
		}
		it.errorFinding(t, fmt.Sprintf("error reply to %s (%s)", cmd, fault), fmt.Sprintf("%s on %s at %s: %v", what, p.name, sent.Format("15:04:05.000"), err))
		return
	}
	t.Fatalf("%s on %s: %v", what, p.name, err)
}

// errorFinding books an error reply as a violation of category cat.
func (it *iteration) errorFinding(t interface{ Logf(string, ...any) }, cat, detail string) {
	it.mu.Lock()
	defer it.mu.Unlock()
	it.found = append(it.found, cat)
	w := it.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stats.categories[cat] == 0 {
		w.stats.examples[cat] = detail
	}
	w.stats.categories[cat]++
	w.stats.violations = append(w.stats.violations, detail)
	t.Logf("VIOLATION %s", detail)
}

// faults are the run's faults so far (none without a nemesis).
func (w *world) faults() []Fault {
	if w.nem == nil {
		return nil
	}
	return w.nem.log.All()
}

// retryable reports whether a command answered err in [sent, recv] on p
// is sent again: it was "store unavailable" during a store fault, or p's
// connection failed while p was being killed (both counted), and it has
// not been retried for a minute. It waits a little before it says so.
//
// Under the nemesis another error during a store fault is a finding (the
// contract: a store that cannot answer is "store unavailable"), booked
// once per command, and the command is sent again too: its outcome is
// unknown, and the policies in force must stay known.
func (w *world) retryable(cmd string, p *proc, sent, recv time.Time, err error) bool {
	if err == nil || time.Since(sent) > time.Minute {
		return false
	}
	if !w.storeUnavailable(cmd, sent, recv, err) && !w.unknownOutcome(p, sent, recv, err) {
		if w.nem == nil || !w.nem.during(storeKinds, "", sent, recv) {
			return false
		}
		if recv.Sub(sent) < 0 || w.noted(p, sent) {
			time.Sleep(50 * time.Millisecond)
			return true
		}
		w.finding(fmt.Sprintf("error reply to %s during a store fault (not store unavailable)", cmd),
			fmt.Sprintf("%s on %s sent %s, answered %s: %v", cmd, p.name, sent.Format("15:04:05.000"), recv.Format("15:04:05.000"), err))
	}
	time.Sleep(50 * time.Millisecond) // the fault is healed within seconds
	return true
}

// noted reports whether the command p sent at sent was booked as a
// finding already (its retries are not booked again).
func (w *world) noted(p *proc, sent time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := p.name + sent.String()
	if w.notedCmd == nil {
		w.notedCmd = map[string]bool{}
	}
	was := w.notedCmd[k]
	w.notedCmd[k] = true
	return was
}

// finding books a violation found outside Check and outside an
// iteration's actions, in category cat.
func (w *world) finding(cat, detail string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stats.categories[cat] == 0 {
		w.stats.examples[cat] = detail
	}
	w.stats.categories[cat]++
	w.stats.violations = append(w.stats.violations, detail)
}

// shapeFinding books a reply of the wrong shape: under the nemesis a
// finding (with the fault it met, the run goes on), else the test fails.
func (it *iteration) shapeFinding(t *rapid.T, what, detail string) {
	if it.w.nem != nil && it.w.keepGoing {
		it.errorFinding(t, "reply shape ("+what+")", detail+" "+it.w.nem.faultsAt(time.Now().Add(-5*time.Second), time.Now()))
		return
	}
	t.Fatalf("reply shape (%s): %s", what, detail)
}

// slotsOf is the hash slot a user key's state lives in (cluster.Key, the
// Redis key sluice keeps it under; cluster.SpaceKey for CL.THROTTLE's), or nil where it is spread or
// elsewhere: a split hot key's sub-buckets, a global key's pools at home,
// a policy whose variants differ in that.
func (w *world) slotsOf(key string, throttle bool) []int {
	if !throttle {
		name := w.match.Match(key).Name
		for _, vs := range []map[string]Variant{w.base, w.alt} {
			if v, ok := vs[name]; ok && (v.Hot == "split" || v.Global) {
				return nil
			}
		}
		if name == "gl" {
			return nil
		}
	}
	if throttle { // CL.THROTTLE's own state: another Redis key, and for a key hashed whole another slot
		return []int{keyslot.Slot(cluster.SpaceKey(limit.SpaceThrottle, key))}
	}
	return []int{keyslot.Slot(cluster.Key(key))}
}
