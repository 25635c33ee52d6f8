//go:build linux

package localredis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// nsPrefix names every network namespace this package makes:
// localredis-<pid of the process that made it>-<random hex>. A namespace
// whose process is gone is a leftover of a run that died, and the next
// Start of a Netns cluster deletes it.
const nsPrefix = "localredis-"

// netnsSubnet is the first two bytes of the addresses of Netns clusters:
// each cluster takes a free 10.79.N.0/24, each node a /30 in it.
const netnsSubnet = "10.79"

// maxNetnsNodes is how many /30 fit in a /24.
const maxNetnsNodes = 64

// defaultNetnsPort is the first client port of a Netns cluster: nothing
// else listens in a new namespace, so Redis's own port is free.
const defaultNetnsPort = 6379

// ipTimeout bounds one ip command.
const ipTimeout = 20 * time.Second

// netnsTool returns the path of ip, or an error wrapping ErrNetns when
// this process cannot make namespaces.
func netnsTool() (string, error) {
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("%w (running as uid %d)", ErrNetns, os.Geteuid())
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		return "", fmt.Errorf("%w and iproute2's ip: %v", ErrNetns, err)
	}
	return ip, nil
}

// CheckNetns reports, as an error wrapping ErrNetns, why a Config.Netns
// cluster cannot be started here; nil when it can (root, ip on PATH).
func CheckNetns() error {
	_, err := netnsTool()
	return err
}

// namespace is the network namespace of a Netns cluster.
type namespace struct {
	name   string // as ip netns knows it
	tag    string // random hex, also in the veth names
	ip     string // path of ip
	subnet int    // N of 10.79.N.0/24
	links  int    // veth pairs made so far
	log    *logger
}

// veth is a node's link: the end inside the namespace, where the node
// listens, and whether SetLink has set it down.
type veth struct {
	ns    *namespace
	inner string
	down  bool
}

// newNamespace deletes leftovers of dead runs and makes a new, empty
// namespace with its loopback up.
func newNamespace(ctx context.Context, s *settings) (*namespace, error) {
	removeStaleNamespaces(ctx, s.ip, s.log)
	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	ns := &namespace{tag: hex.EncodeToString(rnd[:]), ip: s.ip, log: s.log}
	ns.name = fmt.Sprintf("%s%d-%s", nsPrefix, os.Getpid(), ns.tag)
	if err := ns.run(ctx, "netns", "add", ns.name); err != nil {
		return nil, err
	}
	if err := ns.run(ctx, "-n", ns.name, "link", "set", "lo", "up"); err != nil {
		return nil, errors.Join(err, ns.remove())
	}
	s.log.printf("network namespace %s", ns.name)
	return ns, nil
}

// run runs ip with args, failing with its output.
func (ns *namespace) run(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, ipTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, ns.ip, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("localredis: ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// addLinks makes n veth pairs, each with a /30 of a free 10.79.N.0/24:
// the root end .4i+1, the namespace end .4i+2, both up. It returns the
// namespace-end addresses and their veth names.
func (ns *namespace) addLinks(ctx context.Context, n int) (hosts []string, links []*veth, err error) {
	// Two processes choosing a subnet at once could choose the same one:
	// the choice and the root-end addresses are made under a file lock.
	unlock, err := lockFile(filepath.Join(os.TempDir(), "localredis-netns.lock"))
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	if ns.subnet, err = ns.freeSubnet(ctx); err != nil {
		return nil, nil, err
	}
	for i := range n {
		outer, inner := fmt.Sprintf("lrh%s%d", ns.tag, i), fmt.Sprintf("lrn%s%d", ns.tag, i)
		hostIP := fmt.Sprintf("%s.%d.%d", netnsSubnet, ns.subnet, 4*i+1)
		nodeIP := fmt.Sprintf("%s.%d.%d", netnsSubnet, ns.subnet, 4*i+2)
		// Made with its peer already in the namespace, so that deleting
		// the namespace deletes both ends: no half-made pair is left in
		// the root namespace.
		if err := ns.run(ctx, "link", "add", outer, "type", "veth", "peer", "name", inner, "netns", ns.name); err != nil {
			return nil, nil, err
		}
		ns.links++ // remove deletes it from now on
		for _, args := range [][]string{
			{"addr", "add", hostIP + "/30", "dev", outer},
			{"link", "set", outer, "up"},
			{"-n", ns.name, "addr", "add", nodeIP + "/30", "dev", inner},
			{"-n", ns.name, "link", "set", inner, "up"},
		} {
			if err := ns.run(ctx, args...); err != nil {
				return nil, nil, err
			}
		}
		hosts = append(hosts, nodeIP)
		links = append(links, &veth{ns: ns, inner: inner})
	}
	return hosts, links, nil
}

// freeSubnet picks N such that no address of the root namespace is in
// 10.79.N.0/24.
func (ns *namespace) freeSubnet(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, ipTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, ns.ip, "-o", "-4", "addr", "show").Output()
	if err != nil {
		return 0, fmt.Errorf("localredis: ip addr show: %w", err)
	}
	used := string(out)
	var b [1]byte
	for range 512 {
		_, _ = rand.Read(b[:])
		if !strings.Contains(used, fmt.Sprintf(" %s.%d.", netnsSubnet, b[0])) {
			return int(b[0]), nil
		}
	}
	return 0, fmt.Errorf("localredis: no free %s.N.0/24 subnet for a network namespace", netnsSubnet)
}

// remove deletes every veth pair and the namespace. The servers in it
// must have exited. Deleting the namespace alone would delete the pairs
// too, but later, from a kernel work queue: a pair deleted by its root
// end is gone when ip returns.
func (ns *namespace) remove() error {
	var errs []error
	for i := range ns.links {
		errs = append(errs, ns.run(context.Background(), "link", "del", fmt.Sprintf("lrh%s%d", ns.tag, i)))
	}
	errs = append(errs, ns.run(context.Background(), "netns", "del", ns.name))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	ns.log.printf("deleted network namespace %s and its %d veth pairs", ns.name, ns.links)
	return nil
}

// command returns the command that runs bin with args inside the
// namespace. ip netns exec execs bin in place, so the process is bin's.
func (ns *namespace) command(bin string, args ...string) *exec.Cmd {
	return exec.Command(ns.ip, append([]string{"netns", "exec", ns.name, bin}, args...)...)
}

// set brings the namespace end of the link down or up.
func (l *veth) set(up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	return l.ns.run(context.Background(), "-n", l.ns.name, "link", "set", "dev", l.inner, state)
}

// removeStaleNamespaces deletes the namespaces of this package whose
// process is gone, after killing the redis-servers left in them (a server
// outlives its parent only if Pdeathsig missed). Namespaces of live
// processes are left alone.
func removeStaleNamespaces(ctx context.Context, ip string, log *logger) {
	out, err := exec.CommandContext(ctx, ip, "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], nsPrefix) {
			continue
		}
		name := f[0]
		owner, _, _ := strings.Cut(strings.TrimPrefix(name, nsPrefix), "-")
		if pid, err := strconv.Atoi(owner); err != nil || syscall.Kill(pid, 0) == nil {
			continue
		}
		pids, _ := exec.CommandContext(ctx, ip, "netns", "pids", name).Output()
		for _, p := range strings.Fields(string(pids)) {
			pid, err := strconv.Atoi(p)
			if err != nil {
				continue
			}
			if info, ok, err := readProc(pid); err == nil && ok && strings.Contains(info.cmdline, "redis-server") {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if out, err := exec.CommandContext(ctx, ip, "netns", "del", name).CombinedOutput(); err != nil {
			log.printf("removing leftover namespace %s: %v %s", name, err, out)
		} else {
			log.printf("removed leftover namespace %s", name)
		}
	}
}

// lockFile takes an exclusive flock on path, made if missing; unlock
// releases it.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("localredis: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("localredis: lock %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}
