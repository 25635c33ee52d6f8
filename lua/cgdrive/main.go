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
	cmd := exec.Command("valgrind", "--tool=callgrind", "--toggle-collect=processCommand",
		"--callgrind-out-file="+out, "redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir)
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := strconv.Itoa(cmd.Process.Pid)
	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), ReadTimeout: 30 * time.Second})
	defer rc.Close()
	for i := 0; ; i++ {
		if rc.Ping(ctx).Err() == nil {
			break
		}
		if i > 600 {
			return fmt.Errorf("redis-server under valgrind did not answer")
		}
		time.Sleep(100 * time.Millisecond)
	}
	list := standard()
	if phases != "" {
		list = strings.Split(phases, ",")
	}
	dumps := 0
	fmt.Printf("%-36s %12s %10s\n", "phase", "instr/call", "instr/dec")
	for _, ph := range list {
		f := strings.Split(ph, ":")
		if len(f) != 4 {
			return fmt.Errorf("phase %q: want alg:form:n:keys", ph)
		}
		n, err := strconv.Atoi(f[2])
		if err != nil {
			return err
		}
		p := &limit.Policy{Algorithm: limit.Algorithm(f[0]), Limit: 1_000_000, Rate: 1_000_000, Period: time.Second}
		if p.Algorithm == limit.TokenBucket {
			p.Algorithm = ""
		}
		a, err := lua.ArgsFor(p)
		if err != nil {
			return err
		}
		if err := rc.FlushAll(ctx).Err(); err != nil {
			return err
		}
		s := a.Script
		if f[1] == "batch" {
			s = lua.Batch
		}
		if err := rc.ScriptLoad(ctx, s.Src).Err(); err != nil {
			return err
		}
		next := 0
		key := func(i int) string {
			if f[3] == "warm" {
				return "sluice:{user:" + strconv.Itoa(i) + "}"
			}
			next++
			return "sluice:{user:" + strconv.Itoa(next) + "}"
		}
		send := func(m int) error {
			cmds, err := rc.Pipelined(ctx, func(pl redis.Pipeliner) error {
				for range m {
					if f[1] == "single" {
						pl.EvalSha(ctx, s.SHA, []string{key(0)}, a.A[0], a.A[1], a.A[2], 1, 0)
						continue
					}
					args := []any{1, a.ID, a.A[0], a.A[1], a.A[2]}
					for i := range n {
						args = append(args, key(i), 1, 1, 0)
					}
					pl.EvalSha(ctx, s.SHA, nil, args...)
				}
				return nil
			})
			if err != nil {
				return err
			}
			// every decision was decided and admitted, as the policy wants
			for _, c := range cmds {
				v, err := c.(*redis.Cmd).Int64Slice()
				if err != nil {
					return err
				}
				step := lua.ReplyInts
				if f[1] == "batch" {
					step = 1 + lua.ReplyInts
				}
				for i := 0; i+step <= len(v); i += step {
					if v[i] != 1 || f[1] == "batch" && v[i+1] != 1 {
						return fmt.Errorf("reply %v: a decision not served or not admitted", v[i:i+step])
					}
				}
				if len(v) != step*n && (f[1] == "batch" || len(v) != step) {
					return fmt.Errorf("reply of %d integers, want %d", len(v), step*n)
				}
			}
			return nil
		}
		// warm-up: every key of a warm phase exists, the script's code is hot
		if err := send(10); err != nil {
			return fmt.Errorf("%s: %w", ph, err)
		}
		if err := exec.Command("callgrind_control", "-z", pid).Run(); err != nil {
			return fmt.Errorf("callgrind_control -z: %w", err)
		}
		for done := 0; done < calls; done += 50 {
			if err := send(min(50, calls-done)); err != nil {
				return fmt.Errorf("%s: %w", ph, err)
			}
		}
		if err := exec.Command("callgrind_control", "-d", pid).Run(); err != nil {
			return fmt.Errorf("callgrind_control -d: %w", err)
		}
		dumps++
		file := fmt.Sprintf("%s.%d", out, dumps)
		var total int64
		for i := 0; ; i++ {
			total, err = totals(file)
			if err == nil {
				break
			}
			if i > 300 {
				return fmt.Errorf("%s: %w", file, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		os.Rename(file, filepath.Join(dir, strings.ReplaceAll(ph, ":", "_")+".cg"))
		fmt.Printf("%-36s %12d %10d\n", ph, total/int64(calls), total/int64(calls*n))
	}
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
