package helm

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// yamlBlock is a fenced ```yaml block of a Markdown page.
var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// The values files that docs/kubernetes.md shows render, decode strictly,
// give sluice only flags it takes, and their policies pass sluice check:
// the page cannot go stale against the chart.
func TestDocsValuesRender(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile(filepath.Join(repoRoot, "docs", "kubernetes.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := yamlBlock.FindAllSubmatch(page, -1)
	if len(blocks) < 2 {
		t.Fatalf("%d yaml blocks in docs/kubernetes.md, want the two values examples", len(blocks))
	}
	bin, flags := sluiceBin(t), serveFlags(t)
	for i, b := range blocks {
		o := render(t, readValues(t, string(b[1])))
		c := container(t, o.deployment(t))
		for _, err := range serveArgsErrors(c.Args, flags) {
			t.Errorf("block %d: %v", i+1, err)
		}
		for _, cm := range o.configMaps {
			f := filepath.Join(t.TempDir(), "sluice.yaml")
			if err := os.WriteFile(f, []byte(cm.Data["sluice.yaml"]), 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := sluiceCheck(bin, "check", "--config="+f); err != nil || !strings.Contains(out, "ok") {
				t.Errorf("block %d: sluice check: %v %s", i+1, err, out)
			}
		}
	}
}
