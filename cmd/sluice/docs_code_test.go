package main

// Tests that catch a doc saying one thing and the code another, of the
// kinds a reader of docs/architecture.md and the package comments met:
// a door said to import less than it does, a command table left out of a
// list, a reply field missing a value, a function named that only tests
// call, a file a comment points at that is not there, a "0 means" on a
// field that has no zero number.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// architectureParagraph returns the paragraph of docs/architecture.md that
// starts with "**name**".
func architectureParagraph(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, para := range strings.Split(string(raw), "\n\n") {
		if strings.HasPrefix(para, "**"+name+"**") {
			return para
		}
	}
	t.Fatalf("docs/architecture.md has no paragraph starting **%s**", name)
	return ""
}

// The "A door." paragraph names every package of sluice a door imports.
func TestArchitectureNamesDoorImports(t *testing.T) {
	t.Parallel()
	para := architectureParagraph(t, "A door.")
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`,
		"../../server", "../../httpfront", "../../rls").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/sluice-rl/sluice/"
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		door := strings.TrimPrefix(fields[0], module)
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			pkg := strings.TrimPrefix(imp, module)
			if !strings.Contains(para, "`"+pkg+"`") {
				t.Errorf("docs/architecture.md, \"A door.\": %s imports %s, which the paragraph does not name", door, pkg)
			}
		}
	}
}

// The "A command." paragraph names every file of server/ that declares
// commands.
func TestArchitectureNamesCommandFiles(t *testing.T) {
	t.Parallel()
	para := architectureParagraph(t, "A command.")
	files, err := filepath.Glob(filepath.Join(repoRoot, "server", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	decl := regexp.MustCompile(`(?m)^func \w+\(\) (\[\]\*command|\*command) \{`)
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !decl.Match(src) {
			continue
		}
		n++
		base := filepath.Base(f)
		if !strings.Contains(para, "`"+base+"`") && !strings.Contains(para, "`server/"+base+"`") {
			t.Errorf("docs/architecture.md, \"A command.\": server/%s declares commands, the paragraph does not name it", base)
		}
	}
	if n < 5 {
		t.Errorf("found %d files declaring commands, want the five or more the server has", n)
	}
}

// decidedByValues are the values of limit's By* constants: every
// decided_by a reply may carry.
func decidedByValues(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(repoRoot, "limit", "limit.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var vals []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "By") || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					v, _ := strconv.Unquote(lit.Value)
					vals = append(vals, v)
				}
			}
		}
	}
	if len(vals) < 10 {
		t.Fatalf("limit/limit.go: found %d By* constants, want every decided_by", len(vals))
	}
	return vals
}

// RL.TAKE's reply, as server/ratecmds.go documents it, lists every
// decided_by value (a family written with * covers its members).
func TestRateCommandsListDecidedBy(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join(repoRoot, "server", "ratecmds.go"))
	if err != nil {
		t.Fatal(err)
	}
	var line string // the field's text, its continuation lines included
	for _, l := range strings.Split(string(src), "\n") {
		if strings.Contains(l, "decided_by:") {
			line = l
		} else if line != "" && strings.HasPrefix(l, "//    ") {
			line += " " + strings.TrimPrefix(l, "//")
		} else if line != "" {
			break
		}
	}
	if line == "" {
		t.Fatal("server/ratecmds.go documents no decided_by field")
	}
	for _, v := range decidedByValues(t) {
		family := v
		if i := strings.IndexByte(v, '-'); i > 0 {
			family = v[:i+1] + "*"
		}
		if !regexp.MustCompile(`[\s,]`+regexp.QuoteMeta(v)+`\b`).MatchString(line) && !strings.Contains(line, family) {
			t.Errorf("server/ratecmds.go: the decided_by field does not list %q: %s", v, strings.TrimSpace(line))
		}
	}
}

// Every function docs/architecture.md names with its file is called by
// code outside tests: the walk of RL.TAKE names what runs, not a helper
// only the tests use.
func TestArchitectureNamesFunctionsThatRun(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	code := nonTestGo(t)
	for _, m := range namedFuncRE.FindAllStringSubmatch(string(raw), -1) {
		file, name, method := m[1], m[2], m[3]
		if !strings.HasSuffix(file, ".go") {
			continue
		}
		called := name
		if method != "" {
			called = method
		}
		use := regexp.MustCompile(`[^\w]` + called + `[\[(]`)
		decl := regexp.MustCompile(`^func (\(\w+ \*?\w+\) )?` + called + `[\[(]`)
		if method == "" && regexp.MustCompile(`(?m)^type `+name+` `).Match(code[file]) {
			continue // a type, not a function
		}
		found := false
		for path, src := range code {
			for _, l := range strings.Split(string(src), "\n") {
				if use.MatchString(l) && !decl.MatchString(l) && !strings.HasPrefix(strings.TrimSpace(l), "//") {
					found = true
					break
				}
			}
			if found {
				_ = path
				break
			}
		}
		if !found {
			t.Errorf("docs/architecture.md names %s, which no code outside tests calls", m[0])
		}
	}
}

// nonTestGo reads every non-test .go file of the tree, by path from the
// repository's root.
func nonTestGo(t *testing.T) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != repoRoot) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		files[filepath.ToSlash(rel)] = src
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// goFileRE finds a Go or Lua file a comment names, by its path from the
// repository (app/policy.go, lua/state.lua) or from the comment's own
// package (breaker.go).
var goFileRE = regexp.MustCompile(`(?:^|[\s(\x60"])((?:[a-z][a-z0-9-]*/)*[a-z0-9_]+\.(?:go|lua))\b`)

// Every file a comment names by its path is there, and every function a
// comment names as `file.go: Name` is declared in it: a comment cannot say
// the adapter is in a file it has left.
func TestCommentsNameRealFiles(t *testing.T) {
	t.Parallel()
	code := nonTestGo(t)
	named := 0
	for path, src := range code {
		f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ParseComments)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, cg := range f.Comments {
			text := cg.Text()
			for _, m := range goFileRE.FindAllStringSubmatch(text, -1) {
				rel := m[1]
				// From the root, from the comment's package, or a script by
				// its name in lua/.
				if !fileIn(rel, ".", filepath.Dir(path), "lua") {
					t.Errorf("%s: a comment names %s, which is not in the tree", path, rel)
				}
				named++
			}
		}
	}
	if named < 20 {
		t.Errorf("comments name %d files by path, want the 20 or more the tree has", named)
	}
}

// fileIn reports whether rel is a file below one of dirs of the repository.
func fileIn(rel string, dirs ...string) bool {
	for _, d := range dirs {
		if st, err := os.Stat(filepath.Join(repoRoot, d, rel)); err == nil && !st.IsDir() {
			return true
		}
	}
	return false
}

// A field of a type without a zero number (a func, a pointer, an
// interface, a map, a slice, a channel) does not say "0 means": its zero
// value is nil.
func TestNoZeroMeansOnNilableFields(t *testing.T) {
	t.Parallel()
	zeroRE := regexp.MustCompile(`\b0 means\b`)
	checked := 0
	for path, src := range nonTestGo(t) {
		f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ParseComments)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			st, ok := n.(*ast.StructType)
			if !ok {
				return true
			}
			for _, fld := range st.Fields.List {
				if fld.Doc == nil || len(fld.Names) == 0 {
					continue
				}
				switch fld.Type.(type) {
				case *ast.FuncType, *ast.StarExpr, *ast.InterfaceType, *ast.MapType, *ast.ArrayType, *ast.ChanType:
				default:
					continue
				}
				if at, ok := fld.Type.(*ast.ArrayType); ok && at.Len != nil {
					continue // a fixed array has a zero of numbers
				}
				checked++
				if zeroRE.MatchString(fld.Doc.Text()) {
					t.Errorf("%s: field %s is nilable, its comment says %q", path, fld.Names[0].Name, zeroRE.FindString(fld.Doc.Text()))
				}
			}
			return true
		})
	}
	if checked < 20 {
		t.Errorf("checked %d nilable fields with comments, want the 20 or more the tree has", checked)
	}
}
