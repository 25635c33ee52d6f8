package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// apache2SHA256 is the SHA-256 of the Apache License 2.0 as the ASF
// publishes it (https://www.apache.org/licenses/LICENSE-2.0.txt), the
// text google.golang.org/grpc and k8s.io/api ship as their LICENSE.
const apache2SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"

// LICENSE is the Apache License 2.0, unchanged: an edit, even of the
// appendix's template, makes it a licence of our own.
func TestLicenseIsApache2(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(repoRoot, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != apache2SHA256 {
		t.Errorf("LICENSE has sha256 %x, want %s (the Apache License 2.0 unchanged)", sum, apache2SHA256)
	}
}

// NOTICE carries, for every module the binary links that ships a NOTICE
// file, that module's heading and every line of its notice (Apache
// License 2.0, section 4(d)): a dependency added or bumped with a notice
// of its own fails here until NOTICE says it.
func TestNoticeCoversLinkedModules(t *testing.T) {
	t.Parallel()
	goBin := requireTool(t, "go")
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}} {{.Dir}}{{end}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	notice, err := os.ReadFile(filepath.Join(repoRoot, "NOTICE"))
	if err != nil {
		t.Fatal(err)
	}
	seen, found := map[string]bool{}, 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, dir, ok := strings.Cut(line, " ")
		if !ok || seen[path] {
			continue
		}
		seen[path] = true
		files, _ := filepath.Glob(filepath.Join(dir, "NOTICE*"))
		for _, f := range files {
			text, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			found++
			if !strings.Contains(string(notice), "---- "+path+" (") {
				t.Errorf("NOTICE has no section for %s, whose %s every copy of the binary must carry", path, filepath.Base(f))
				continue
			}
			for _, l := range strings.Split(string(text), "\n") {
				if l = strings.TrimSpace(l); l != "" && !strings.Contains(string(notice), l) {
					t.Errorf("NOTICE lacks this line of %s's %s: %s", path, filepath.Base(f), l)
				}
			}
		}
	}
	if len(seen) == 0 || found == 0 {
		t.Fatalf("go list found %d modules, %d NOTICE files: the test checked nothing", len(seen), found)
	}
}
