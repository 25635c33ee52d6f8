package app

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/flags.md from the table")

// TestFlagsDoc: docs/flags.md is what the table renders, so that the flag
// reference cannot go stale. Regenerate: go test ./app -run TestFlagsDoc -update
func TestFlagsDoc(t *testing.T) {
	path := filepath.Join("..", "docs", "flags.md")
	want := FlagsMarkdown()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (generate it: go test ./app -run TestFlagsDoc -update)", err)
	}
	if string(got) != want {
		t.Errorf("%s differs from the table of app/config.go; run: go test ./app -run TestFlagsDoc -update", path)
	}
}

// TestFlagsTable: every row is registered exactly once, under a name of
// its own, and names a source for each value with several.
func TestFlagsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, n := range FlagNames() {
		if seen[n] {
			t.Errorf("--%s: twice in the table", n)
		}
		seen[n] = true
	}
	fs := FlagSet(nil)
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		if !seen[f.Name] {
			t.Errorf("--%s: registered, not in the table", f.Name)
		}
	})
	if n != len(seen) {
		t.Errorf("%d flags registered, %d in the table", n, len(seen))
	}
}
