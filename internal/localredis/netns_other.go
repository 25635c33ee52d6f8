//go:build !linux

package localredis

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
)

// Network namespaces are Linux's: elsewhere a Netns cluster is refused.

const (
	maxNetnsNodes    = 64
	defaultNetnsPort = 6379
)

type namespace struct{ name string }

type veth struct {
	ns   *namespace
	down bool
}

func netnsTool() (string, error) {
	return "", fmt.Errorf("%w on Linux (this is %s)", ErrNetns, runtime.GOOS)
}

// CheckNetns reports, as an error wrapping ErrNetns, why a Config.Netns
// cluster cannot be started here: on this system, always.
func CheckNetns() error {
	_, err := netnsTool()
	return err
}

func newNamespace(context.Context, *settings) (*namespace, error) {
	_, err := netnsTool()
	return nil, err
}

func (*namespace) addLinks(context.Context, int) ([]string, []*veth, error) {
	_, err := netnsTool()
	return nil, nil, err
}

func (*namespace) remove() error { return nil }

func (*namespace) command(bin string, args ...string) *exec.Cmd { return exec.Command(bin, args...) }

func (*veth) set(bool) error { _, err := netnsTool(); return err }
