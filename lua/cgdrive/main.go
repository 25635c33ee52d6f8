// Command cgdrive counts the instructions redis-server spends per decision
// of sluice's scripts under callgrind: it starts redis-server under
// valgrind --tool=callgrind --toggle-collect=processCommand (only command
// execution is counted: the script, its redis.call's, the reply), and per
// phase zeroes the counters, sends a fixed number of calls of the real
// scripts with the real argument encoding, dumps, and prints instructions
// per call and per decision (docs/performance.md, "Lua work per
// decision"). It needs valgrind (callgrind_control) and redis-server; it
// listens on loopback only and stops the redis-server it started.
//
//	go run ./lua/cgdrive [-calls 300] [-port 17391] [-phases token_bucket:batch:16:cold,...]
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/lua"
)

func main() {
	port := flag.Int("port", 17391, "loopback port for redis-server")
	calls := flag.Int("calls", 300, "script calls per phase")
	dir := flag.String("dir", "", "callgrind output directory (empty: a new temporary one)")
	phases := flag.String("phases", "", "comma list alg:form:n:keys, e.g. token_bucket:single:1:cold,token_bucket:batch:16:warm (empty: the standard set)")
	flag.Parse()
	if err := run(*port, *calls, *dir, *phases); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

var algs = []limit.Algorithm{limit.TokenBucket, limit.GCRA, limit.SlidingWindow, limit.FixedWindow}

func standard() []string {
	var ps []string
	for _, a := range algs {
		for _, keys := range []string{"cold", "warm"} {
			ps = append(ps, fmt.Sprintf("%s:single:1:%s", a, keys))
			for _, n := range []int{1, 4, 16} {
				ps = append(ps, fmt.Sprintf("%s:batch:%d:%s", a, n, keys))
			}
		}
	}
	return ps
}

func run(port, calls int, dir, phases string) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "cgdrive")
		if err != nil {
			return err
		}
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	fmt.Printf("callgrind files in %s\n", dir)
	out := filepath.Join(dir, "cg.out")
	cmd, rc, err := startCallgrind(port, dir, out)
	if err != nil {
		return err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	defer rc.Close()
	list := standard()
	if phases != "" {
		list = strings.Split(phases, ",")
	}
	fmt.Printf("%-36s %12s %10s\n", "phase", "instr/call", "instr/dec")
	for i, ph := range list {
		if err := runPhase(rc, strconv.Itoa(cmd.Process.Pid), out, i+1, ph, calls); err != nil {
			return err
		}
	}
	return nil
}

// startCallgrind starts redis-server under callgrind on loopback port and
// waits until it answers.
func startCallgrind(port int, dir, out string) (*exec.Cmd, *redis.Client, error) {
	cmd := exec.Command("valgrind", "--tool=callgrind", "--toggle-collect=processCommand",
		"--callgrind-out-file="+out, "redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir)
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), ReadTimeout: 30 * time.Second})
	for i := 0; rc.Ping(context.Background()).Err() != nil; i++ {
		if i > 600 {
			rc.Close()
			cmd.Process.Kill()
			cmd.Wait()
			return nil, nil, fmt.Errorf("redis-server under valgrind did not answer")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return cmd, rc, nil
}

// phase is one alg:form:n:keys of the command line.
type phase struct {
	form, keys string // single | batch; cold | warm
	n          int    // keys per call
	a          *lua.Args
	s          *lua.Script
	next       int // the last cold key handed out
}

func parsePhase(ph string) (*phase, error) {
	f := strings.Split(ph, ":")
	if len(f) != 4 {
		return nil, fmt.Errorf("phase %q: want alg:form:n:keys", ph)
	}
	n, err := strconv.Atoi(f[2])
	if err != nil {
		return nil, err
	}
	p := &limit.Policy{Algorithm: limit.Algorithm(f[0]), Limit: 1_000_000, Rate: 1_000_000, Period: time.Second}
	if p.Algorithm == limit.TokenBucket {
		p.Algorithm = ""
	}
	a, err := lua.ArgsFor(p)
	if err != nil {
		return nil, err
	}
	s := a.Script
	if f[1] == "batch" {
		s = lua.Batch
	}
	return &phase{form: f[1], keys: f[3], n: n, a: &a, s: s}, nil
}

func (p *phase) key(i int) string {
	if p.keys == "warm" {
		return "sluice:{user:" + strconv.Itoa(i) + "}"
	}
	p.next++
	return "sluice:{user:" + strconv.Itoa(p.next) + "}"
}

// send sends m calls in one pipeline and checks that every decision was
// decided and admitted, as the policy wants.
func (p *phase) send(ctx context.Context, rc *redis.Client, m int) error {
	a := p.a
	cmds, err := rc.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for range m {
			if p.form == "single" {
				pl.EvalSha(ctx, p.s.SHA, []string{p.key(0)}, a.Limit, a.Rate, a.Unit, 1, 0)
				continue
			}
			args := []any{1, a.ID, a.Limit, a.Rate, a.Unit}
			for i := range p.n {
				args = append(args, p.key(i), 1, 1, 0)
			}
			pl.EvalSha(ctx, p.s.SHA, nil, args...)
		}
		return nil
	})
	if err != nil {
		return err
	}
	step := lua.ReplyInts
	if p.form == "batch" {
		step = 1 + lua.ReplyInts
	}
	for _, c := range cmds {
		v, err := c.(*redis.Cmd).Int64Slice()
		if err != nil {
			return err
		}
		for i := 0; i+step <= len(v); i += step {
			if v[i] != 1 || p.form == "batch" && v[i+1] != 1 {
				return fmt.Errorf("reply %v: a decision not served or not admitted", v[i:i+step])
			}
		}
		if len(v) != step*p.n && (p.form == "batch" || len(v) != step) {
			return fmt.Errorf("reply of %d integers, want %d", len(v), step*p.n)
		}
	}
	return nil
}

// runPhase counts one phase: warm-up, zero the counters, calls, dump, and
// prints instructions per call and per decision.
func runPhase(rc *redis.Client, pid, out string, dump int, ph string, calls int) error {
	ctx := context.Background()
	p, err := parsePhase(ph)
	if err != nil {
		return err
	}
	if err := rc.FlushAll(ctx).Err(); err != nil {
		return err
	}
	if err := rc.ScriptLoad(ctx, p.s.Src).Err(); err != nil {
		return err
	}
	// warm-up: every key of a warm phase exists, the script's code is hot
	if err := p.send(ctx, rc, 10); err != nil {
		return fmt.Errorf("%s: %w", ph, err)
	}
	if err := exec.Command("callgrind_control", "-z", pid).Run(); err != nil {
		return fmt.Errorf("callgrind_control -z: %w", err)
	}
	for done := 0; done < calls; done += 50 {
		if err := p.send(ctx, rc, min(50, calls-done)); err != nil {
			return fmt.Errorf("%s: %w", ph, err)
		}
	}
	if err := exec.Command("callgrind_control", "-d", pid).Run(); err != nil {
		return fmt.Errorf("callgrind_control -d: %w", err)
	}
	file := fmt.Sprintf("%s.%d", out, dump)
	var total int64
	for i := 0; ; i++ {
		if total, err = totals(file); err == nil {
			break
		}
		if i > 300 {
			return fmt.Errorf("%s: %w", file, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	os.Rename(file, filepath.Join(filepath.Dir(out), strings.ReplaceAll(ph, ":", "_")+".cg"))
	fmt.Printf("%-36s %12d %10d\n", ph, total/int64(calls), total/int64(calls*p.n))
	return nil
}

func totals(file string) (int64, error) {
	fh, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "totals:"); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no totals line yet")
}
