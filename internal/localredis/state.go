package localredis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// StateFile is the name of the file, in the cluster's folder, where Up
// records what Down must stop.
const StateFile = "cluster.json"

// State is the content of the state file that Up writes.
type State struct {
	// Primaries is a seed list for clients: "127.0.0.1:port" of each
	// primary at the time of Up.
	Primaries []string    `json:"primaries"`
	Nodes     []StateNode `json:"nodes"`
	Created   time.Time   `json:"created"`
}

// StateNode is one server of a State.
type StateNode struct {
	Addr string `json:"addr"`
	Port int    `json:"port"`
	Pid  int    `json:"pid"`
	// Start is the process start time as the OS tells it (clock ticks
	// after boot on Linux), so that Down can tell the server from a later
	// process that reuses its pid.
	Start string `json:"start,omitempty"`
	Dir   string `json:"dir"`
}

// procInfo is what the OS says of a process.
type procInfo struct {
	cmdline string
	start   string
	zombie  bool
}

// Up starts a cluster as Start does, with Detach set, so that the servers
// outlive this process, and records them in Dir/cluster.json for Down as
// soon as they answer, so that Down can clean up after an Up that died
// halfway. cfg.Dir is required. Up refuses a folder whose state file names
// servers that still run.
func Up(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Dir == "" {
		return nil, errors.New("localredis: Up needs a Dir, to keep its state file in")
	}
	cfg.Detach = true
	c, err := startCluster(ctx, cfg, true)
	if err != nil {
		return nil, err
	}
	c.s.log.printf("state in %s; stop with Down", filepath.Join(c.dir, StateFile))
	return c, nil
}

// saveState writes the state file, if this cluster keeps one.
func (c *Cluster) saveState() error {
	if !c.record {
		return nil
	}
	st := State{Primaries: c.Addrs(), Created: time.Now().UTC()}
	for _, n := range c.nodes {
		sn := StateNode{Addr: n.Addr, Port: n.Port, Pid: n.Pid, Dir: n.Dir}
		if p, ok, err := readProc(n.Pid); err == nil && ok {
			sn.Start = p.start
		}
		st.Nodes = append(st.Nodes, sn)
	}
	return writeState(c.dir, st)
}

func writeState(dir string, st State) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("localredis: %w", err)
	}
	tmp, err := os.CreateTemp(dir, StateFile+".tmp*")
	if err != nil {
		return fmt.Errorf("localredis: %w", err)
	}
	_, err = tmp.Write(append(data, '\n'))
	err = errors.Join(err, tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, StateFile))
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("localredis: write state: %w", err)
	}
	return nil
}

// ReadState reads the state file in dir. A missing file gives an error
// that matches fs.ErrNotExist.
func ReadState(dir string) (*State, error) {
	data, err := os.ReadFile(filepath.Join(dir, StateFile))
	if err != nil {
		return nil, fmt.Errorf("localredis: %w", err)
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("localredis: %s: %w", filepath.Join(dir, StateFile), err)
	}
	return &st, nil
}

// ours reports whether pid still is the redis-server that sn recorded: it
// exists, is no zombie, runs redis-server on sn.Port and, when known,
// started when recorded.
func (sn StateNode) ours() bool {
	p, ok, err := readProc(sn.Pid)
	if err != nil || !ok || p.zombie {
		return false
	}
	// Redis retitles itself "redis-server 127.0.0.1:<port> [cluster]".
	if !strings.Contains(p.cmdline, "redis-server") || !strings.Contains(p.cmdline, strconv.Itoa(sn.Port)) {
		return false
	}
	return sn.Start == "" || p.start == sn.Start
}

// alive returns the pids of the state's servers that still run.
func (st *State) alive() []int {
	var pids []int
	for _, sn := range st.Nodes {
		if sn.ours() {
			pids = append(pids, sn.Pid)
		}
	}
	return pids
}

// Down stops the servers recorded in dir's state file by Up: SIGTERM, then
// SIGKILL after a few seconds, and waits until they have exited. It signals
// a pid only while /proc shows it is still that redis-server (a pid reused
// by another process is left alone). It removes the state file once every
// server is gone and leaves the node folders (logs) in place. A missing
// state file gives an error that matches fs.ErrNotExist.
func Down(dir string) error {
	st, err := ReadState(dir)
	if err != nil {
		return err
	}
	errs := make([]error, len(st.Nodes))
	var wg sync.WaitGroup
	for i, sn := range st.Nodes {
		wg.Go(func() { errs[i] = sn.stop(5 * time.Second) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, StateFile)); err != nil {
		return fmt.Errorf("localredis: %w", err)
	}
	return nil
}

func (sn StateNode) stop(grace time.Duration) error {
	if !sn.ours() {
		return nil
	}
	if err := signalPid(sn.Pid, sigTerm); err != nil {
		return fmt.Errorf("localredis: stop %s (pid %d): %w", sn.Addr, sn.Pid, err)
	}
	_ = signalPid(sn.Pid, sigCont) // in case it was paused
	if sn.waitGone(grace) {
		return nil
	}
	if !sn.ours() {
		return nil
	}
	if err := signalPid(sn.Pid, sigKill); err != nil {
		return fmt.Errorf("localredis: kill %s (pid %d): %w", sn.Addr, sn.Pid, err)
	}
	if sn.waitGone(5 * time.Second) {
		return nil
	}
	return fmt.Errorf("localredis: %s (pid %d) still runs after SIGKILL", sn.Addr, sn.Pid)
}

// waitGone polls until the server has exited (a zombie counts: it only
// waits for its parent to reap it) or d has passed.
func (sn StateNode) waitGone(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if !sn.ours() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, not synchronising
	}
}
