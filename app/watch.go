package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watchQuiet is how long the watched directories must stay quiet after an
// event before the files are read: an in-place write (truncate, then
// write) or an editor's save is a burst of events, and the file is read
// once, whole, after it.
const watchQuiet = 100 * time.Millisecond

// kubeData is the symlink a mounted ConfigMap or Secret volume swaps to
// put a new payload in force: every file of the volume is a symlink
// through it (sluice.yaml -> ..data/sluice.yaml), so the file's own name
// sees no event when its content changes.
const kubeData = "..data"

// watchTarget is one thing the watch keeps in step with the disk: the
// --config file, the --aclfile or the --envoy-config directory. Its
// directory is watched, never the file: a watch on the file's inode is
// lost when an editor renames a new file over it or the kubelet swaps
// ..data, and a file that is removed and comes back is seen again.
type watchTarget struct {
	flag   string                 // "config", "aclfile" or "envoy-config", for the log
	path   string                 // as given on the command line
	dir    string                 // the directory watched
	names  func(name string) bool // whether an event on this name in dir may change it
	digest func() (string, error) // the content now; an error wrapping fs.ErrNotExist: gone
	reload func()                 // the reload SIGHUP does of it; called with the watch's mutex held

	// Guarded by the watch's mutex.
	last string // digest of the content last read, by the watch or by SIGHUP
	gone bool   // the last check found nothing to read
}

// fileTarget is a target for one file: events on its own name or on
// ..data beside it, the content the bytes it resolves to.
func fileTarget(flag, path string, reload func()) *watchTarget {
	base := filepath.Base(path)
	return &watchTarget{
		flag: flag, path: path, dir: filepath.Dir(path), reload: reload,
		names:  func(name string) bool { return name == base || name == kubeData },
		digest: func() (string, error) { return fileDigest(path) },
	}
}

// dirTarget is a target for the --envoy-config directory: events on any
// file envoycfg.LoadDir reads, or on ..data; the content every such file's
// name and bytes.
func dirTarget(flag, dir string, reload func()) *watchTarget {
	return &watchTarget{
		flag: flag, path: dir, dir: dir, reload: reload,
		names:  func(name string) bool { return name == kubeData || envoyFile(name) },
		digest: func() (string, error) { return dirDigest(dir) },
	}
}

// envoyFile reports whether envoycfg.LoadDir reads a file of this name.
func envoyFile(name string) bool {
	return !strings.HasPrefix(name, ".") && (strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml"))
}

// errEmpty is a watched file read empty: taken for a write in progress
// (an in-place write truncates first), never loaded by the watch.
var errEmpty = errors.New("empty file")

// fileDigest is the SHA-256 of the bytes path resolves to.
func fileDigest(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	if len(b) == 0 {
		return "", fmt.Errorf("%s: %w", path, errEmpty)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// dirDigest is the SHA-256 of the names and bytes of the files of dir that
// envoycfg.LoadDir reads (regular files, symlinks followed), in name
// order.
func dirDigest(dir string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if envoyFile(e.Name()) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	h := sha256.New()
	for _, name := range names {
		path := filepath.Join(dir, name)
		if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
			continue // LoadDir skips it too
		}
		b, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(h, "%s\x00unreadable: %v\x00", name, err)
			continue
		}
		if len(b) == 0 {
			return "", fmt.Errorf("%s: %w", path, errEmpty)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// watch reloads its targets when their content changes on disk. A change
// is a new digest of the content, so a burst of events, a touch or a
// rewrite of the same bytes reloads nothing more, and the reload is the
// one SIGHUP does (same validation, the last good config kept on error,
// same log lines and metrics). A target whose file is gone is left as it
// is, its last good content in force, until the file comes back; one read
// empty is a write in progress, left for the event that completes it.
type watch struct {
	mu      *sync.Mutex // held by each reload, the watch's and SIGHUP's
	targets []*watchTarget
	quiet   time.Duration                        // after the last event, before reading
	after   func(time.Duration) <-chan time.Time // time.After, or a test's clock
	log     *slog.Logger
}

// newWatch is the watch of targets, their digests taken now: call it
// before the files are first loaded, so that a change made between that
// load and the start of the watch is seen when it starts.
func newWatch(mu *sync.Mutex, targets []*watchTarget, quiet time.Duration, after func(time.Duration) <-chan time.Time, log *slog.Logger) *watch {
	w := &watch{mu: mu, targets: targets, quiet: quiet, after: after, log: log}
	w.seen()
	return w
}

// seen takes the digest of every target as SIGHUP reads them, so that the
// watch does not reload what SIGHUP has just reloaded. Call it with the
// mutex held.
func (w *watch) seen() {
	if w == nil {
		return
	}
	for _, t := range w.targets {
		d, err := t.digest()
		t.last, t.gone = d, err != nil
	}
}

// start watches the targets' directories until ctx ends; the returned
// channel is closed once the watch has stopped. Before waiting for
// events it checks every target once.
func (w *watch) start(ctx context.Context) (<-chan struct{}, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	added := map[string]bool{}
	for _, t := range w.targets {
		if added[t.dir] {
			continue
		}
		if err := fw.Add(t.dir); err != nil {
			fw.Close()
			return nil, fmt.Errorf("watching %s: %w", t.dir, err)
		}
		added[t.dir] = true
		w.log.Info("watching for changes", "flag", "--"+t.flag, "path", t.path, "dir", t.dir)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer fw.Close()
		w.run(ctx, fw.Events, fw.Errors)
	}()
	return done, nil
}

// run is the watch's loop over fsnotify's events and errors: each event
// on a name a target cares about marks it pending and restarts the quiet
// interval; when the interval passes, every pending target is checked.
// An event queue that overflowed checks every target.
func (w *watch) run(ctx context.Context, events <-chan fsnotify.Event, errs <-chan error) {
	pending := make(map[*watchTarget]bool, len(w.targets))
	for _, t := range w.targets {
		pending[t] = true
	}
	w.checkPending(pending)
	var quiet <-chan time.Time
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return
			}
			if !ev.Has(fsnotify.Create | fsnotify.Write | fsnotify.Rename | fsnotify.Remove) {
				continue // a touch or chmod: no content changes
			}
			n := 0
			for _, t := range w.targets {
				if filepath.Dir(ev.Name) == filepath.Clean(t.dir) && t.names(filepath.Base(ev.Name)) {
					pending[t] = true
					n++
				}
			}
			if n > 0 {
				quiet = w.after(w.quiet)
			}
		case err, ok := <-errs:
			if !ok {
				return
			}
			w.log.Warn("config watch", "err", err)
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				for _, t := range w.targets {
					pending[t] = true
				}
				quiet = w.after(w.quiet)
			}
		case <-quiet:
			quiet = nil
			w.checkPending(pending)
		case <-ctx.Done():
			return
		}
	}
}

// checkPending checks each pending target, in the order given, and clears
// it.
func (w *watch) checkPending(pending map[*watchTarget]bool) {
	for _, t := range w.targets {
		if pending[t] {
			delete(pending, t)
			w.check(t)
		}
	}
}

// check reloads t if its content differs from what was last read.
func (w *watch) check(t *watchTarget) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d, err := t.digest()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if !t.gone {
			w.log.Warn("watched file gone; keeping what is in force until it comes back", "flag", "--"+t.flag, "path", t.path)
		}
		t.gone = true
		return
	case errors.Is(err, errEmpty):
		w.log.Debug("watched file empty; waiting for its content", "flag", "--"+t.flag, "path", t.path)
		return
	case err != nil:
		d = "unreadable: " + err.Error() // the reload says why, once per error
	}
	t.gone = false
	if d == t.last {
		w.log.Debug("watched file unchanged", "flag", "--"+t.flag, "path", t.path)
		return
	}
	t.last = d
	w.log.Info("watched file changed; reloading", "flag", "--"+t.flag, "path", t.path)
	t.reload()
}

// newWatch is the watch of the files sluice reloads: --config, --aclfile
// and --envoy-config, those given; nil with --watch-config=false or when
// none is (the built-in policy has no file).
func (a *App) newWatch() *watch {
	if !a.cfg.WatchConfig {
		return nil
	}
	var targets []*watchTarget
	if a.cfg.PolicyFile != "" {
		targets = append(targets, fileTarget("config", a.cfg.PolicyFile, func() { _ = a.reloadPolicies() }))
	}
	if a.cfg.ACLFile != "" {
		targets = append(targets, fileTarget("aclfile", a.cfg.ACLFile, func() { _ = a.reloadACL() }))
	}
	if a.cfg.EnvoyConfig != "" {
		targets = append(targets, dirTarget("envoy-config", a.cfg.EnvoyConfig, a.reloadEnvoyConfig))
	}
	if len(targets) == 0 {
		return nil
	}
	return newWatch(&a.reloadMu, targets, watchQuiet, time.After, a.log)
}

// startWatch starts the file watch until ctx ends or stopWatch. A watch
// that cannot start (inotify's limits reached) is logged: sluice serves
// on, and SIGHUP still reloads.
func (a *App) startWatch(ctx context.Context) {
	if a.watch == nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	done, err := a.watch.start(ctx)
	if err != nil {
		cancel()
		a.log.Error("config watch not started; reload with SIGHUP", "err", err)
		return
	}
	a.watchStop = func() { cancel(); <-done }
}

// stopWatch ends the file watch and waits for it.
func (a *App) stopWatch() {
	if a.watchStop != nil {
		a.watchStop()
		a.watchStop = nil
	}
}
