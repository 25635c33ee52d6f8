package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/redistest"
)

// requireTool finds a binary; with CI set a missing one fails the test, so
// a CI job cannot pass by benchmarking nothing.
func requireTool(t *testing.T, name string) {
	t.Helper()
	redistest.SkipShort(t, name)
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not found on PATH: CI must install redis-server and redis-tools", name)
		}
		t.Skipf("%s not found on PATH", name)
	}
}

// TestBenchQuickEndToEnd runs `sluice-lab bench --quick` as users do: a real
// cluster, a real sluice child, redis-benchmark, about 20,000 requests in
// all. It checks the shape of what comes out and that nothing is left
// running, never how fast anything was.
func TestBenchQuickEndToEnd(t *testing.T) {
	for _, tool := range []string{"redis-benchmark", "redis-server", "redis-cli"} {
		requireTool(t, tool)
	}
	dir := t.TempDir()
	// sluice-lab starts the sluice beside it, as after make build.
	bin := filepath.Join(dir, "sluice-lab")
	for _, pkg := range []string{"../cmd/sluice", "../cmd/sluice-lab"} {
		if out, err := exec.Command("go", "build", "-o", dir, pkg).CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", pkg, err, out)
		}
	}
	md, svg := filepath.Join(dir, "out", "r.md"), filepath.Join(dir, "out", "r.svg")

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "bench", "--quick", "--pipelines", "1,4", "--keyspace", "1000", "--out", md, "--svg", svg)
	cmd.SysProcAttr = childAttr()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sluice-lab bench: %v\nstderr:\n%s\nstdout:\n%s", err, stderr.String(), stdout.String())
	}
	progress := stderr.String()
	t.Logf("progress:\n%s", progress)
	if want := filepath.Join(dir, "sluice") + " serve"; !strings.Contains(progress, want) {
		t.Errorf("sluice-lab bench did not start the sluice beside it (%s):\n%s", want, progress)
	}

	for _, want := range []string{"| uniform | 1 | 2,000 |", "| uniform | 4 | 2,000 |", "| hot | 1 | 2,000 |", "| hot | 4 | 2,000 |",
		"--cluster -h 127.0.0.1", "'sluice:{tag}:__rand_int__'", "RL.TAKE key:__rand_int__ 1", "'sluice:{hot}'"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, stdout.String())
		}
	}
	for _, side := range []string{"sluice", "embedded", "direct"} {
		if n := strings.Count(stdout.String(), " | "+side+" | "); n != 4 {
			t.Errorf("report lists %d %s runs, want 4:\n%s", n, side, stdout.String())
		}
	}
	// Every row has the embedded side's req/s and CPU and the sluice
	// side's commands per store pipeline: no n/a in the summary table
	// but the Redis CPU of runs the machine cannot read.
	for _, line := range strings.Split(stdout.String(), "\n") {
		if strings.HasPrefix(line, "| uniform |") || strings.HasPrefix(line, "| hot |") {
			cells := strings.Split(line, "|")
			if len(cells) != 20 {
				t.Errorf("row has %d cells, want 18: %s", len(cells)-2, line)
				continue
			}
			for _, i := range []int{5, 9, 15, 16, 17} { // embedded req/s, p50/p99, CPU, store path CPU, commands per pipeline
				if c := strings.TrimSpace(cells[i]); c == "n/a" || c == "n/a / n/a" || c == "" {
					t.Errorf("cell %d is %q: %s", i, c, line)
				}
			}
		}
	}
	got, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != stdout.String() {
		t.Errorf("%s differs from what was printed", md)
	}
	doc, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	if _, rects := decodeSVG(t, string(doc)); rects != 3+2*4 {
		t.Errorf("SVG has %d rects, want %d", rects, 3+2*4)
	}
	if !strings.Contains(progress, "[12/12] round 1 hot") {
		t.Errorf("progress lacks the last run")
	}

	// Everything the benchmark started is gone.
	var pids []int
	if m := regexp.MustCompile(`redis pids \[([0-9 ]+)\]; sluice pid (\d+); embedded sluice pid (\d+)`).FindStringSubmatch(progress); m != nil {
		for _, f := range strings.Fields(m[1] + " " + m[2] + " " + m[3]) {
			pid, _ := strconv.Atoi(f)
			pids = append(pids, pid)
		}
	} else {
		t.Fatalf("progress lacks the pids")
	}
	if len(pids) != 8 {
		t.Errorf("%d pids, want 6 redis-servers and 2 sluices: %v", len(pids), pids)
	}
	for _, pid := range pids {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err == nil && !bytes.Contains(stat, []byte(") Z ")) {
			t.Errorf("pid %d still runs after sluice-lab bench: %s", pid, stat)
		}
	}
}
