package main

import (
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var tokenLineRE = regexp.MustCompile(`^7\) "([0-9a-f]{32})"$`)

// The RL.ACQUIRE session of docs/concurrency.md, typed into redis-cli one
// command at a time against the binary on the page's config:
// every line must be the page's, a time within the session's duration
// below it, and `<token>` stands for the last token the session printed
// (in a reply line, for any 32 hex digits).
func TestConcurrencyDocSessions(t *testing.T) {
	t.Parallel()
	cli := requireTool(t, "redis-cli")
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docs/concurrency.md"))
	if err != nil {
		t.Fatal(err)
	}
	config := strings.Join(docBlock(t, string(raw), "concurrency-test: config"), "\n") + "\n"
	s := startSluice(t, "--config", writeConfig(t, config))
	replaySlots(t, cli, s.Addr, docBlock(t, string(raw), "concurrency-test: session"))
}

// replaySlots runs a session block (see TestConcurrencyDocSessions).
func replaySlots(t *testing.T, cli, addr string, block []string) {
	host, port := hostPort(t, addr)
	start := time.Now()
	token, cmd := "", ""
	var got []string
	n := 0
	for _, l := range block[1:] {
		if m := promptRE.FindStringSubmatch(l); m != nil {
			if n < len(got) {
				t.Errorf("after %q: redis-cli printed more than the page: %q", cmd, got[n:])
			}
			cmd = strings.ReplaceAll(m[1], "<token>", token)
			out, err := exec.Command(cli, append([]string{"-h", host, "-p", port, "--no-raw"}, strings.Fields(cmd)...)...).Output()
			if err != nil {
				t.Fatalf("redis-cli %s: %v", cmd, err)
			}
			got = strings.Split(strings.TrimRight(string(bytes.TrimSpace(out)), "\n"), "\n")
			n = 0
			continue
		}
		if n >= len(got) {
			t.Fatalf("after %q: the page has %q, redis-cli printed nothing more", cmd, l)
		}
		g := got[n]
		n++
		slack := int64(math.Ceil(float64(time.Since(start))/float64(time.Millisecond))) + 1
		want := sessionLine{cmd: cmd, text: l}
		if m := integerRE.FindStringSubmatch(l); m != nil && strings.HasPrefix(strings.ToUpper(cmd), "RL.ACQUIRE") {
			want.ms = (m[1] == "4" || m[1] == "5") && m[2] != "-1" && m[2] != "0"
		}
		if m := tokenLineRE.FindStringSubmatch(g); m != nil && l == `7) "<token>"` {
			token = m[1]
			continue
		}
		if !checkSessionLine(want, g, slack) {
			t.Errorf("after %q: the page has %q, redis-cli printed %q", cmd, l, g)
		}
	}
	if n < len(got) {
		t.Errorf("after %q: redis-cli printed more than the page: %q", cmd, got[n:])
	}
}
