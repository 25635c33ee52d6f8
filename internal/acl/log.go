package acl

import (
	"sync"
	"sync/atomic"
	"time"
)

// DefaultLogLen is how many entries a Log keeps, as Redis's
// acllog-max-len.
const DefaultLogLen = 128

// mergeWindow is how long after its last update an entry absorbs the same
// refusal again instead of a new entry being made (Redis's
// ACL_LOG_GROUPING_MAX_TIME_DELTA); mergeScan is how many of the newest
// entries are searched for one.
const (
	mergeWindow = 60 * time.Second
	mergeScan   = 10
)

// Entry is one line of ACL LOG: a refusal, or Count of the same refusal.
type Entry struct {
	ID         int64
	Count      int64
	Reason     string // ReasonCommand, ReasonKey or ReasonAuth
	Context    string // "toplevel" for RESP; a door may name itself ("http", "grpc")
	Object     string // the command's full name, the key, or "AUTH"
	Username   string
	ClientInfo string // who asked, as CLIENT INFO describes the client
	Created    time.Time
	Updated    time.Time
}

// Log keeps the last refusals, newest first, merging a repeat of the same
// (reason, context, object, username) within a minute into one entry with
// a count, as Redis's ACL LOG does. It is safe for concurrent use; its
// memory is bounded by its length and the size of what it is given.
type Log struct {
	notify atomic.Pointer[func(Entry)] // Notify's; nil: none

	mu      sync.Mutex
	max     int
	nextID  int64
	entries []Entry // newest first
}

// NewLog returns an empty Log of at most max entries (DefaultLogLen when
// max <= 0).
func NewLog(max int) *Log {
	if max <= 0 {
		max = DefaultLogLen
	}
	return &Log{max: max}
}

// Add records a refusal at now. Only Reason, Context, Object, Username and
// ClientInfo of e are read.
func (l *Log) Add(e Entry, now time.Time) {
	if f := l.notify.Load(); f != nil {
		(*f)(e)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := 0; i < len(l.entries) && i < mergeScan; i++ {
		m := &l.entries[i]
		if m.Reason == e.Reason && m.Context == e.Context && m.Object == e.Object &&
			m.Username == e.Username && now.Sub(m.Updated) <= mergeWindow {
			m.Count++
			m.Updated = now
			m.ClientInfo = e.ClientInfo
			merged := *m
			copy(l.entries[1:i+1], l.entries[:i])
			l.entries[0] = merged
			return
		}
	}
	e.ID, e.Count, e.Created, e.Updated = l.nextID, 1, now, now
	l.nextID++
	if len(l.entries) < l.max {
		l.entries = append(l.entries, Entry{})
	}
	copy(l.entries[1:], l.entries[:len(l.entries)-1])
	l.entries[0] = e
}

// Notify has f called with every refusal Add records, before it is
// merged (for metrics: one call per refusal, whatever ACL LOG keeps). f
// runs on the door's path, from many goroutines: it must be fast and safe
// for concurrent use.
func (l *Log) Notify(f func(Entry)) { l.notify.Store(&f) }

// Entries returns up to n entries, newest first (every entry when n < 0).
func (l *Log) Entries(n int) []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n < 0 || n > len(l.entries) {
		n = len(l.entries)
	}
	return append([]Entry(nil), l.entries[:n]...)
}

// Reset empties the log.
func (l *Log) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = nil
}
