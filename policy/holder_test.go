package policy

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestHolderKeepsLastGoodOnBadReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeFile(t, path, designConfig)
	first, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	h := NewHolder(first)

	writeFile(t, path, strings.Replace(designConfig, "limit: 5 ", "limit: -5", 1))
	s, err := h.Reload(path)
	if err == nil || s != nil {
		t.Fatalf("Reload of a bad config = %v, %v; want nil and an error", s, err)
	}
	if want := path + `:8: policy #1 "login": limit: must be a positive integer, got -5`; err.Error() != want {
		t.Errorf("Reload error:\n got %v\nwant %s", err, want)
	}
	if h.Current() != first {
		t.Error("a bad reload replaced the current set")
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Reload(path); err == nil || !strings.HasPrefix(err.Error(), path+": cannot read config: ") {
		t.Errorf("Reload of a missing file: %v", err)
	}
	if h.Current() != first {
		t.Error("a failed read replaced the current set")
	}

	writeFile(t, path, strings.Replace(designConfig, "limit: 5 ", "limit: 7 ", 1))
	s, err = h.Reload(path)
	if err != nil {
		t.Fatal(err)
	}
	if h.Current() != s || s.Match("login:x").Limit != 7 {
		t.Errorf("a good reload did not take: current limit %d", h.Current().Match("login:x").Limit)
	}
}

func TestHolderNilIsDefault(t *testing.T) {
	h := NewHolder(nil)
	if p := h.Current().Match("k"); p == nil || p.Name != "default" {
		t.Errorf("NewHolder(nil).Current().Match = %v, want the default policy", p)
	}
	h.Store(nil)
	if h.Current() == nil {
		t.Error("Store(nil) cleared the holder")
	}
}

// TestHolderConcurrent reloads while readers match; run with -race.
func TestHolderConcurrent(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	writeFile(t, good, designConfig)
	writeFile(t, bad, "policies: [")
	h := NewHolder(nil)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if h.Current().Match("login:1") == nil {
					t.Error("Match returned nil during reloads")
					return
				}
			}
		}()
	}
	for i := range 200 {
		path := good
		if i%2 == 1 {
			path = bad
		}
		_, err := h.Reload(path)
		if (err == nil) != (path == good) {
			t.Errorf("Reload(%s): %v", path, err)
		}
	}
	close(stop)
	wg.Wait()
	if h.Current().Source != good {
		t.Errorf("Source = %q, want %q", h.Current().Source, good)
	}
}
