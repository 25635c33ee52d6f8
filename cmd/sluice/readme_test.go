package main

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The docs are tested as go-redis tests its doctests: the redis-cli
// sessions of the README and the docs pages are replayed against the
// binary, and every link and repository path the docs name must exist, so
// neither can go stale.

// repoRoot is the repository, seen from this package's directory.
const repoRoot = "../.."

// docBlock returns the lines of the fenced block that follows the comment
// <!-- marker --> in a page's text (blank lines may come between them).
func docBlock(t *testing.T, text, marker string) []string {
	t.Helper()
	comment := "<!-- " + marker + " -->"
	i := strings.Index(text, comment)
	if i < 0 {
		t.Fatalf("no %s", comment)
	}
	lines := strings.Split(text[i+len(comment):], "\n")
	start := -1
	for j, l := range lines {
		switch {
		case start < 0 && strings.HasPrefix(l, "```"):
			start = j + 1
		case start < 0 && strings.TrimSpace(l) != "":
			t.Fatalf("%s is followed by %q, want a fenced block", comment, l)
		case start >= 0 && strings.HasPrefix(l, "```"):
			return lines[start:j]
		}
	}
	t.Fatalf("the block after %s is not closed", comment)
	return nil
}

// sessionLine is one line a reply of the session prints.
type sessionLine struct {
	cmd  string // the command it answers, as typed
	text string
	// ms is set for a time (fields 4 and 5 of a six-field reply, above 0):
	// it counts down as the clock runs, so it is compared within the
	// session's duration.
	ms bool
}

var (
	promptRE  = regexp.MustCompile(`^[0-9.]+:[0-9]+> (.*)$`)
	integerRE = regexp.MustCompile(`^(?:\s*[0-9]+\) )*?\s*([0-9]+)\) \(integer\) (-?[0-9]+)$`)
)

// parseSession splits the session into the redis-cli arguments, the
// commands typed and the reply lines expected.
func parseSession(t *testing.T, block []string) (args, cmds []string, want []sessionLine) {
	t.Helper()
	if len(block) == 0 || !strings.HasPrefix(block[0], "$ redis-cli") {
		t.Fatalf("the session must start with `$ redis-cli …`, got %q", block)
	}
	args = strings.Fields(strings.TrimPrefix(block[0], "$ redis-cli"))
	cmd := ""
	for _, l := range block[1:] {
		if m := promptRE.FindStringSubmatch(l); m != nil {
			cmd = m[1]
			cmds = append(cmds, cmd)
			continue
		}
		if cmd == "" {
			t.Fatalf("session line %q comes before any command", l)
		}
		sl := sessionLine{cmd: cmd, text: l}
		name := strings.ToUpper(strings.Fields(cmd)[0])
		if m := integerRE.FindStringSubmatch(l); m != nil && (name == "RL.TAKE" || name == "RL.PEEK" || name == "RL.MTAKE" || name == "RL.ADJUST") {
			v, _ := strconv.ParseInt(m[2], 10, 64)
			sl.ms = (m[1] == "4" || m[1] == "5") && v > 0
		}
		want = append(want, sl)
	}
	return args, cmds, want
}

// withPort replaces the session's -h and -p with the test server's.
func withPort(args []string, host, port string) []string {
	out := []string{"-h", host, "-p", port}
	for i := 0; i < len(args); i++ {
		if (args[i] == "-p" || args[i] == "-h") && i+1 < len(args) {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// checkSessionLine compares one printed line with the page's. A time may
// be lower than the page's by at most slackMs: the page shows it as a
// session typed in one go gets it.
func checkSessionLine(w sessionLine, got string, slackMs int64) bool {
	if !w.ms {
		return got == w.text
	}
	wm, gm := integerRE.FindStringSubmatch(w.text), integerRE.FindStringSubmatch(got)
	if gm == nil || gm[1] != wm[1] {
		return false
	}
	if strings.TrimSuffix(got, gm[2]) != strings.TrimSuffix(w.text, wm[2]) {
		return false // the same field, the same indentation
	}
	wv, _ := strconv.ParseInt(wm[2], 10, 64)
	gv, _ := strconv.ParseInt(gm[2], 10, 64)
	return gv <= wv && gv >= wv-slackMs
}

// The README's redis-cli session, typed into redis-cli against the binary
// on the README's config: every reply line must be the README's, the times
// within the session's own duration.
func TestReadmeSession(t *testing.T) {
	t.Parallel()
	replaySession(t, "README.md", "readme-test: config", "readme-test: session")
}

// replaySession replays the session block after <!-- session --> of page
// (README.md or docs/X.md) as TestReadmeSession says, on a binary of its
// own started on the page's config block, the one after <!-- config -->.
func replaySession(t *testing.T, page, config, session string) {
	cli := requireTool(t, "redis-cli")
	raw, err := os.ReadFile(filepath.Join(repoRoot, page))
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	if page == "README.md" && !strings.Contains(text, "serve --config sluice.yaml") {
		t.Fatal("README.md no longer says to start `sluice serve --config sluice.yaml` for the session")
	}
	cfg := strings.Join(docBlock(t, text, config), "\n") + "\n"
	args, cmds, want := parseSession(t, docBlock(t, text, session))
	if len(cmds) == 0 || len(want) == 0 {
		t.Fatalf("%s: the session has no command or no reply", page)
	}
	s := startSluice(t, "--config", writeConfig(t, cfg))
	host, port := hostPort(t, s.Addr)

	// Without a terminal redis-cli prints raw replies; --no-raw makes it
	// print them as it does to the user at the prompt.
	cmd := exec.Command(cli, append(withPort(args, host, port), "--no-raw")...)
	cmd.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	slack := int64(math.Ceil(float64(time.Since(start))/float64(time.Millisecond))) + 1
	if err != nil {
		t.Fatalf("redis-cli: %v\n%s%s", err, out, stderr.Bytes())
	}
	var got []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		got = append(got, sc.Text())
	}
	for i, w := range want {
		if i >= len(got) {
			t.Errorf("after %q: %s has %q, redis-cli printed nothing more", w.cmd, page, w.text)
			break
		}
		if !checkSessionLine(w, got[i], slack) {
			tol := ""
			if w.ms {
				tol = " (a time: within " + strconv.FormatInt(slack, 10) + " ms below it)"
			}
			t.Errorf("after %q: %s has %q%s, redis-cli printed %q", w.cmd, page, w.text, tol, got[i])
		}
	}
	if len(got) > len(want) {
		t.Errorf("redis-cli printed %d lines more than %s: %q", len(got)-len(want), page, got[len(want):])
	}
	if t.Failed() {
		t.Logf("redis-cli printed:\n%s", out)
	}
}

// docFiles are the README and the docs pages.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(repoRoot, "README.md")}, pages...)
}

var (
	linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeRE = regexp.MustCompile("`([^`]+)`")
)

// anchorOf is GitHub's anchor for a heading: lower case, punctuation but
// - and _ dropped, spaces as -.
func anchorOf(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the anchors of a Markdown file's headings.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	fenced := false
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
		}
		if !fenced && strings.HasPrefix(l, "#") {
			out[anchorOf(strings.TrimSpace(strings.TrimLeft(l, "#")))] = true
		}
	}
	return out
}

// repoPath reports whether a word of a code span names a path of this
// repository: it has a slash and starts with a top-level entry.
func repoPath(word string, top map[string]bool) (string, bool) {
	w := strings.TrimLeft(strings.TrimRight(word, ",;:.)"), "(")
	w = strings.TrimPrefix(w, "./")
	if !strings.Contains(w, "/") || strings.ContainsAny(w, "<>*…{}$?=#|") || strings.Contains(w, "...") || strings.Contains(w, "://") {
		return "", false
	}
	first, _, _ := strings.Cut(w, "/")
	if !top[first] {
		return "", false
	}
	return strings.TrimSuffix(w, "/"), true
}

// Every relative link of the README and docs/*.md, with its anchor, and
// every repository path they name in backticks exists in the tree.
func TestDocsLinksAndPaths(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	top := map[string]bool{}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			top[e.Name()] = true
		}
	}
	exists := func(where, rel string) bool {
		if _, err := os.Stat(filepath.Join(repoRoot, rel)); err == nil {
			return true
		}
		t.Errorf("%s names %s, which is not in the tree", where, rel)
		return false
	}
	for _, file := range docFiles(t) {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(repoRoot, file)
		fenced := false
		for n, line := range strings.Split(string(raw), "\n") {
			where := name + ":" + strconv.Itoa(n+1)
			if strings.HasPrefix(line, "```") {
				fenced = !fenced
			}
			if fenced {
				continue
			}
			for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
				target, anchor, _ := strings.Cut(m[1], "#")
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				rel := filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(name), target)))
				if target == "" {
					rel = name
				}
				if !exists(where, strings.TrimSuffix(rel, "/")) || anchor == "" {
					continue
				}
				if !anchors(t, filepath.Join(repoRoot, rel))[anchor] {
					t.Errorf("%s links to %s#%s: %s has no such heading", where, rel, anchor, rel)
				}
			}
			for _, m := range codeRE.FindAllStringSubmatch(line, -1) {
				for _, word := range strings.Fields(m[1]) {
					if rel, ok := repoPath(word, top); ok {
						exists(where, rel)
					}
				}
			}
		}
	}
}

// docs/architecture.md's package map names every package of the tree.
func TestArchitectureListsEveryPackage(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	seen := map[string]bool{}
	for path := range nonTestGo(t) {
		dir := filepath.ToSlash(filepath.Dir(path))
		if seen[dir] {
			continue
		}
		seen[dir] = true
		if !strings.Contains(doc, "| `"+dir+"` |") && !strings.Contains(doc, "| `"+dir+"/` |") {
			t.Errorf("docs/architecture.md: the package map has no row for %s", dir)
		}
	}
	if len(seen) < 20 {
		t.Errorf("found %d packages, want the tree's 20 or more", len(seen))
	}
}

// namedFuncRE finds a function named with its file in backticks:
// `cluster/store.go: Store.Do`, `lua/state.lua: read`.
var namedFuncRE = regexp.MustCompile("`([A-Za-z0-9_/.-]+\\.(?:go|lua)): ([A-Za-z_][A-Za-z0-9_]*)(?:\\.([A-Za-z_][A-Za-z0-9_]*))?(?:\\(\\))?`")

// Every function docs/architecture.md names with its file is in that file:
// the walk of RL.TAKE cannot point at code that has moved.
func TestArchitectureNamesRealFunctions(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, m := range namedFuncRE.FindAllStringSubmatch(string(raw), -1) {
		file, name, method := m[1], m[2], m[3]
		src, err := os.ReadFile(filepath.Join(repoRoot, file))
		if err != nil {
			t.Errorf("docs/architecture.md names %s: %v", m[0], err)
			continue
		}
		var decl string
		switch {
		case strings.HasSuffix(file, ".lua"):
			decl = `(?m)^(local )?function ` + name + `\(`
		case method != "":
			decl = `(?m)^func \(\w+ \*?` + name + `\) ` + method + `[\[(]`
		default:
			decl = `(?m)^(func ` + name + `[\[(]|type ` + name + ` )`
		}
		if !regexp.MustCompile(decl).Match(src) {
			t.Errorf("docs/architecture.md names %s, which %s does not declare", m[0], file)
		}
		found++
	}
	if found < 20 {
		t.Errorf("docs/architecture.md names %d functions with their files, want the walk's 20 or more", found)
	}
}
