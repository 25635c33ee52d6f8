package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// sluicePackage is the server's main package, which sluiceBinary builds
// when no sluice binary stands beside this one.
const sluicePackage = "github.com/sluice-rl/sluice/cmd/sluice"

// sluiceBinary is the sluice binary an experiment starts as `sluice serve`
// when its config names none. The lab is a binary of its own (sluice-lab)
// and the server another, so it looks, in order, for: `sluice` beside this
// executable (make build and go install put the two side by side); one
// built into dir from the module the command runs in (go run
// ./cmd/sluice-lab in a checkout: the server of the same source); `sluice`
// on PATH. Which one it took is a progress line.
func sluiceBinary(ctx context.Context, dir string, logf func(string, ...any)) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the sluice binary: %w", err)
	}
	beside := filepath.Join(filepath.Dir(self), "sluice")
	if p, err := exec.LookPath(beside); err == nil {
		return p, nil
	}
	built := filepath.Join(dir, "sluice")
	out, buildErr := exec.CommandContext(ctx, "go", "build", "-o", built, sluicePackage).CombinedOutput()
	if buildErr == nil {
		logf("no sluice beside %s: built %s from this checkout", self, sluicePackage)
		return built, nil
	}
	if p, err := exec.LookPath("sluice"); err == nil {
		logf("no sluice beside %s and none built here (%v): %s from PATH", self, buildErr, p)
		return p, nil
	}
	why, _, _ := strings.Cut(string(out), "\n")
	return "", errors.New("no sluice binary: none beside " + self + ", none built by `go build " + sluicePackage +
		"` here (" + why + "), none on PATH; build one (make build, or go install ./cmd/...), or give bench its --binary")
}
