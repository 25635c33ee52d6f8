package delayproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Config says what a Proxy forwards and how.
type Config struct {
	// Listen is the address to listen on. "" means "127.0.0.1:0", a free
	// loopback port.
	Listen string
	// Target is the address every accepted connection is forwarded to.
	// Required.
	Target string
	// Delay is the one-way delay added to every byte in each direction;
	// the round trip through the proxy costs at least twice as much. 0
	// forwards at once.
	Delay time.Duration
	// MaxInFlight bounds the bytes held per direction of one connection
	// (read, not yet written). 0 means 1 MiB. It also bounds throughput
	// per connection to MaxInFlight per Delay, a bandwidth-delay product
	// far above what a rate limiter's traffic needs.
	MaxInFlight int
	// DialTimeout bounds the connection to Target. 0 means 5s.
	DialTimeout time.Duration
	// Classify, when set, names the Link a connection travels, from the
	// first bytes its client sends (one read, as they came): the same
	// proxy can then delay, stall or cut some clients and not others. It
	// must not keep first. nil puts every connection on the default link
	// "".
	Classify func(first []byte) string
}

const (
	defaultMaxInFlight = 1 << 20
	defaultDialTimeout = 5 * time.Second
	readBuffer         = 32 << 10
	// queueChunks bounds the chunks queued per direction, whatever their
	// size: a sender of many tiny writes meets backpressure too.
	queueChunks = 4096
)

// mode is what the proxy does with bytes and connections.
type mode int

const (
	open    mode = iota // forward after the delay
	stalled             // hold every byte; accept new connections, deliver nothing
	cut                 // reset every connection, old and new
)

// Proxy is a delaying TCP proxy. Its methods are safe for concurrent use.
type Proxy struct {
	ln          net.Listener
	target      string
	maxInFlight int
	dialTimeout time.Duration
	classify    func([]byte) string
	def         *Link        // the link "", and the settings a new link starts with
	held        atomic.Int64 // bytes read and not yet written, every connection

	mu     sync.Mutex // guards what follows and every link's mode
	links  map[string]*Link
	allCut bool // Proxy.Cut(true): reset connections as accepted
	conns  map[*pair]struct{}
	closed bool
	wg     sync.WaitGroup // the accept loop and every pair
}

// New starts a proxy listening on listen (see Config.Listen) that forwards
// to target with oneWay delay in each direction.
func New(listen, target string, oneWay time.Duration) (*Proxy, error) {
	return Start(Config{Listen: listen, Target: target, Delay: oneWay})
}

// Start starts a proxy as cfg says; Close stops it.
func Start(cfg Config) (*Proxy, error) {
	switch {
	case cfg.Target == "":
		return nil, errors.New("delayproxy: Target is required")
	case cfg.Delay < 0:
		return nil, fmt.Errorf("delayproxy: Delay must not be negative, got %v", cfg.Delay)
	case cfg.MaxInFlight < 0:
		return nil, fmt.Errorf("delayproxy: MaxInFlight must not be negative, got %d", cfg.MaxInFlight)
	case cfg.DialTimeout < 0:
		return nil, fmt.Errorf("delayproxy: DialTimeout must not be negative, got %v", cfg.DialTimeout)
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = defaultMaxInFlight
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = defaultDialTimeout
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("delayproxy: %w", err)
	}
	p := &Proxy{
		ln:          ln,
		target:      cfg.Target,
		maxInFlight: cfg.MaxInFlight,
		dialTimeout: cfg.DialTimeout,
		classify:    cfg.Classify,
		links:       make(map[string]*Link),
		conns:       make(map[*pair]struct{}),
	}
	p.def = p.newLink("", cfg.Delay, open)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address the proxy listens on, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Delay is the one-way delay of the default link now.
func (p *Proxy) Delay() time.Duration { return p.def.Delay() }

// SetDelay changes the one-way delay of every link, of the bytes read from
// now on; bytes already read keep the time they were given.
func (p *Proxy) SetDelay(d time.Duration) {
	for _, l := range p.allLinks() {
		l.SetDelay(d)
	}
}

// Held is the number of bytes read and not yet written, over every
// connection: what the proxy holds in memory.
func (p *Proxy) Held() int64 { return p.held.Load() }

// Conns is the number of connections being forwarded.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Stall, on, holds every byte of every link, read from now on or already
// held, and delivers nothing; new connections are accepted and held the
// same way, so peers see timeouts, as in a network partition. Off, it
// forwards again: what was held leaves at once (its time has passed), in
// order, as TCP delivers what it retransmits after a partition heals.
// Stall(false) also ends a Cut.
func (p *Proxy) Stall(on bool) { p.setAll(map[bool]mode{true: stalled, false: open}[on]) }

// Cut, on, resets every connection of every link (both sides see a reset,
// held bytes are dropped) and resets every new one as soon as it is
// accepted, so peers see refused and reset connections, as when a link is
// torn down. Off, new connections are forwarded again. Cut(false) also
// ends a Stall.
func (p *Proxy) Cut(on bool) { p.setAll(map[bool]mode{true: cut, false: open}[on]) }

func (p *Proxy) setAll(m mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.allCut = m == cut
	for _, l := range p.links {
		l.setModeLocked(m)
	}
}

func (p *Proxy) allLinks() []*Link {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*Link, 0, len(p.links))
	for _, l := range p.links {
		out = append(out, l)
	}
	return out
}

// Link returns the link named name, made on first use with the default
// link's delay and mode. Connections travel a link when Config.Classify
// names it.
func (p *Proxy) Link(name string) *Link {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.linkLocked(name)
}

func (p *Proxy) linkLocked(name string) *Link {
	if l, ok := p.links[name]; ok {
		return l
	}
	return p.newLinkLocked(name, p.def.Delay(), p.def.mode)
}

func (p *Proxy) newLink(name string, delay time.Duration, m mode) *Link {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.newLinkLocked(name, delay, m)
}

func (p *Proxy) newLinkLocked(name string, delay time.Duration, m mode) *Link {
	l := &Link{p: p, name: name, mode: m, changed: make(chan struct{})}
	l.delay.Store(int64(delay))
	p.links[name] = l
	return l
}

// Link is the path of some of a proxy's connections (see Config.Classify):
// its own delay and mode. Its methods are safe for concurrent use.
type Link struct {
	p     *Proxy
	name  string
	delay atomic.Int64 // one way, in nanoseconds

	// Guarded by p.mu.
	mode    mode
	changed chan struct{} // closed, and replaced, when mode changes
}

// Name is the link's name.
func (l *Link) Name() string { return l.name }

// Delay is the link's one-way delay now.
func (l *Link) Delay() time.Duration { return time.Duration(l.delay.Load()) }

// SetDelay changes the link's one-way delay of the bytes read from now on.
func (l *Link) SetDelay(d time.Duration) { l.delay.Store(int64(max(d, 0))) }

// Stall holds, or releases, the bytes of this link's connections, as
// Proxy.Stall does for all of them.
func (l *Link) Stall(on bool) { l.setMode(map[bool]mode{true: stalled, false: open}[on]) }

// Cut resets this link's connections, and each new one once its first
// bytes name this link, or stops doing so, as Proxy.Cut does for all of
// them.
func (l *Link) Cut(on bool) { l.setMode(map[bool]mode{true: cut, false: open}[on]) }

func (l *Link) setMode(m mode) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	if l.p.allCut && m != cut {
		l.p.allCut = false
	}
	l.setModeLocked(m)
}

func (l *Link) setModeLocked(m mode) {
	if l.mode == m {
		return
	}
	l.mode = m
	close(l.changed)
	l.changed = make(chan struct{})
	if m == cut {
		for pr := range l.p.conns {
			if pr.link.Load() == l {
				pr.abort(true)
			}
		}
	}
}

// state is the link's mode and the channel closed when it next changes.
func (l *Link) state() (mode, <-chan struct{}) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.mode, l.changed
}

// Close stops listening, closes every connection and returns when every
// goroutine of the proxy has ended. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return nil
	}
	p.closed = true
	for pr := range p.conns {
		pr.abort(false)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	if err != nil {
		return fmt.Errorf("delayproxy: %w", err)
	}
	return nil
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	backoff := time.Duration(0)
	for {
		c, err := p.ln.Accept()
		if err != nil {
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors, or a connection aborted before it
			// was accepted: try again, a little later each time, as
			// net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		p.mu.Lock()
		switch {
		case p.closed:
			p.mu.Unlock()
			_ = c.Close()
			return
		case p.allCut || p.classify == nil && p.def.mode == cut:
			p.mu.Unlock()
			reset(c)
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		pr := &pair{p: p, client: c, ctx: ctx, cancel: cancel}
		if p.classify == nil {
			pr.link.Store(p.def)
		}
		p.conns[pr] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go pr.run()
	}
}

// reset closes c so that its peer sees a reset, not an orderly end.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// pair is one accepted connection and its connection to the target.
type pair struct {
	p      *Proxy
	client net.Conn
	ctx    context.Context // done when the pair is torn down
	cancel context.CancelFunc
	// link is the pair's link: set at once without Config.Classify, else
	// when the client's first bytes have been read; nil until then.
	link atomic.Pointer[Link]

	mu     sync.Mutex // guards server
	server net.Conn
}

// classify puts the pair on the link its client's first bytes name; false
// when that link is cut (the pair is then reset).
func (pr *pair) classify(first []byte) bool {
	p := pr.p
	name := p.classify(first)
	p.mu.Lock()
	l := p.linkLocked(name)
	pr.link.Store(l)
	isCut := l.mode == cut
	p.mu.Unlock()
	if isCut {
		pr.abort(true)
		return false
	}
	return true
}

// linkOrDefault is the pair's link, or the default one before its client
// has spoken (a server that speaks first).
func (pr *pair) linkOrDefault() *Link {
	if l := pr.link.Load(); l != nil {
		return l
	}
	return pr.p.def
}

// abort tears the pair down: both connections closed (reset, when rst),
// every goroutine of the pair released.
func (pr *pair) abort(rst bool) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.ctx.Err() != nil {
		return
	}
	pr.cancel()
	for _, c := range []net.Conn{pr.client, pr.server} {
		if c == nil {
			continue
		}
		if rst {
			reset(c)
		} else {
			_ = c.Close()
		}
	}
}

func (pr *pair) run() {
	p := pr.p
	defer func() {
		p.mu.Lock()
		delete(p.conns, pr)
		p.mu.Unlock()
		p.wg.Done()
	}()
	d := net.Dialer{Timeout: p.dialTimeout}
	upstream, err := d.DialContext(pr.ctx, "tcp", p.target)
	pr.mu.Lock()
	if err == nil && pr.ctx.Err() == nil {
		pr.server = upstream
		pr.mu.Unlock()
	} else {
		pr.mu.Unlock()
		if upstream != nil {
			_ = upstream.Close()
		}
		// The target refused: so does the proxy.
		pr.abort(true)
		return
	}
	up := newDirection(pr, pr.client, upstream)
	down := newDirection(pr, upstream, pr.client)
	var writers, readers sync.WaitGroup
	for _, dir := range []*direction{up, down} {
		readers.Go(dir.read)
		writers.Go(dir.write)
	}
	// Both ends have been told the other's end (or the pair was torn
	// down): nothing more can travel.
	writers.Wait()
	pr.abort(false)
	readers.Wait()
	for _, dir := range []*direction{up, down} {
		dir.drop()
	}
}

// chunk is bytes read at one time, due to leave at due; eof marks the end
// of the stream instead.
type chunk struct {
	b   []byte
	due time.Time
	eof bool
}

// direction forwards src to dst: read stamps chunks and queues them, write
// sends each when it is due. inFlight counts the bytes between the two.
type direction struct {
	pr       *pair
	src, dst net.Conn
	q        chan chunk
	freed    chan struct{} // a token when write has released bytes

	mu       sync.Mutex
	inFlight int
}

func newDirection(pr *pair, src, dst net.Conn) *direction {
	return &direction{pr: pr, src: src, dst: dst, q: make(chan chunk, queueChunks), freed: make(chan struct{}, 1)}
}

func (d *direction) read() {
	buf := make([]byte, readBuffer)
	for {
		n, err := d.src.Read(buf)
		if n > 0 && d.pr.link.Load() == nil && d.src == d.pr.client {
			if !d.pr.classify(buf[:n]) {
				return
			}
		}
		if n > 0 {
			due := time.Now().Add(d.pr.linkOrDefault().Delay())
			if !d.acquire(n) {
				return
			}
			if !d.enqueue(chunk{b: append([]byte(nil), buf[:n]...), due: due}) {
				return
			}
		}
		if err != nil {
			// The end of the stream travels with the same delay.
			d.enqueue(chunk{eof: true, due: time.Now().Add(d.pr.linkOrDefault().Delay())})
			return
		}
	}
}

// acquire waits until n more bytes may be held (or none are held), and
// counts them; false when the pair is torn down first.
func (d *direction) acquire(n int) bool {
	for {
		d.mu.Lock()
		if d.inFlight == 0 || d.inFlight+n <= d.pr.p.maxInFlight {
			d.inFlight += n
			d.mu.Unlock()
			d.pr.p.held.Add(int64(n))
			return true
		}
		d.mu.Unlock()
		select {
		case <-d.freed:
		case <-d.pr.ctx.Done():
			return false
		}
	}
}

func (d *direction) release(n int) {
	d.mu.Lock()
	d.inFlight -= n
	d.mu.Unlock()
	d.pr.p.held.Add(-int64(n))
	select {
	case d.freed <- struct{}{}:
	default:
	}
}

func (d *direction) enqueue(c chunk) bool {
	select {
	case d.q <- c:
		return true
	case <-d.pr.ctx.Done():
		if !c.eof {
			d.release(len(c.b))
		}
		return false
	}
}

// drop releases what is still queued once both goroutines have ended.
func (d *direction) drop() {
	for {
		select {
		case c := <-d.q:
			if !c.eof {
				d.release(len(c.b))
			}
		default:
			return
		}
	}
}

func (d *direction) write() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		var c chunk
		select {
		case c = <-d.q:
		case <-d.pr.ctx.Done():
			return
		}
		if !d.wait(timer, c.due) {
			if !c.eof {
				d.release(len(c.b))
			}
			return
		}
		if c.eof {
			if tc, ok := d.dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			} else {
				d.pr.abort(false)
			}
			return
		}
		_, err := d.dst.Write(c.b)
		d.release(len(c.b))
		if err != nil {
			d.pr.abort(true)
			return
		}
	}
}

// wait returns when due has come and the proxy forwards, or false when the
// pair is torn down first.
func (d *direction) wait(timer *time.Timer, due time.Time) bool {
	for {
		m, changed := d.pr.linkOrDefault().state()
		if m == cut {
			return false
		}
		if m == stalled {
			select {
			case <-changed:
				continue
			case <-d.pr.ctx.Done():
				return false
			}
		}
		left := time.Until(due)
		if left <= 0 {
			return true
		}
		timer.Reset(left)
		select {
		case <-timer.C:
		case <-changed:
			timer.Stop()
		case <-d.pr.ctx.Done():
			timer.Stop()
			return false
		}
	}
}
