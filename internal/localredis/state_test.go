package localredis_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// upDirEnv tells the test binary, run again by TestUpDown, to act as
// `sluice-lab cluster up`: Up in that folder, then exit.
const upDirEnv = "REDISTEST_UP_DIR"

// TestUpDown runs Up in another process that exits at once, as
// `sluice-lab cluster up` does, then checks that the servers outlived it
// and that Down, from this process, stops them through the state file.
func TestUpDown(t *testing.T) {
	t.Parallel()
	redistest.RequireRedis(t, "", "")
	dir := t.TempDir()
	t.Cleanup(func() { _ = localredis.Down(dir) }) // only matters if the test fails

	up := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestUpHelperProcess$", "-test.v")
	up.Env = append(os.Environ(), upDirEnv+"="+dir)
	out, err := up.CombinedOutput()
	if err != nil {
		t.Fatalf("Up in a child process: %v\n%s", err, out)
	}
	t.Logf("child process:\n%s", out)

	st, err := localredis.ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Nodes) != 3 || len(st.Primaries) != 3 {
		t.Fatalf("state has %d nodes, %d primaries; want 3, 3", len(st.Nodes), len(st.Primaries))
	}
	for _, sn := range st.Nodes {
		if !sn.Ours() {
			t.Errorf("%s (pid %d) did not outlive the process that started it", sn.Addr, sn.Pid)
		}
		if pid, err := localredis.ServerPid(t.Context(), sn.Addr); err != nil || pid != sn.Pid {
			t.Errorf("%s answered as pid %d, %v; want %d", sn.Addr, pid, err, sn.Pid)
		}
	}
	if _, err := localredis.Up(t.Context(), localredis.Config{Dir: dir}); !errors.Is(err, localredis.ErrRunning) {
		t.Errorf("second Up on a running dir: %v, want localredis.ErrRunning", err)
	}

	if err := localredis.Down(dir); err != nil {
		t.Fatal(err)
	}
	for _, sn := range st.Nodes {
		if sn.Ours() {
			t.Errorf("%s (pid %d) still running after Down", sn.Addr, sn.Pid)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, localredis.StateFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("state file after Down: %v, want it removed", err)
	}
	if err := localredis.Down(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Down without a state file: %v, want fs.ErrNotExist", err)
	}
}

// TestUpHelperProcess is the child of TestUpDown; on its own it does
// nothing.
func TestUpHelperProcess(t *testing.T) {
	dir := os.Getenv(upDirEnv)
	if dir == "" {
		return
	}
	c, err := localredis.Up(context.Background(), localredis.Config{Dir: dir, Replicas: -1, Log: os.Stdout})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("seeds:", c.Addrs())
	os.Exit(0) // no cleanup: leave the servers running
}

// TestDownSparesOtherProcesses writes a state file whose pid belongs to a
// process that is not redis-server, as after a pid is reused: Down must
// leave it alone.
func TestDownSparesOtherProcesses(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	cmd := exec.Command(sleep, "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })

	p, ok, err := localredis.ReadProc(cmd.Process.Pid)
	if err != nil || !ok {
		t.Fatalf("localredis.ReadProc(%d) = %v, %v", cmd.Process.Pid, ok, err)
	}
	dir := t.TempDir()
	st := localredis.State{Nodes: []localredis.StateNode{
		{Addr: "127.0.0.1:60", Port: 60, Pid: cmd.Process.Pid, Start: localredis.ProcStart(p)},
		{Addr: "127.0.0.1:61", Port: 61, Pid: os.Getpid()},
	}}
	if err := localredis.WriteState(dir, st); err != nil {
		t.Fatal(err)
	}
	if err := localredis.Down(dir); err != nil {
		t.Fatal(err)
	}
	// Down waits for what it signals to exit, so a wrong kill shows now.
	select {
	case <-exited:
		t.Fatal("Down killed a process that is not redis-server")
	default:
	}
	if p, ok, _ := localredis.ReadProc(cmd.Process.Pid); !ok || localredis.ProcZombie(p) {
		t.Errorf("pid %d gone after Down", cmd.Process.Pid)
	}
}
