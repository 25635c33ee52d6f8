package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// build is what `sluice version` says about this binary: the version a
// release stamped, else what the Go toolchain recorded (module version,
// commit, dirty flag), and the toolchain and platform.
type build struct {
	Version   string // the release's -X main.version, else Module, else "(devel)"
	Module    string // the main module's version from the build info: "v0.1.0" for `go install …@v0.1.0`, a pseudo-version for a checkout, "" when unknown
	Revision  string // vcs.revision: the full commit hash, "" when not built from a checkout
	Time      string // vcs.time: the commit's time, RFC 3339
	Modified  bool   // vcs.modified: the checkout had uncommitted changes
	GoVersion string // the toolchain: "go1.26.8"
	Platform  string // GOOS/GOARCH: "linux/amd64"
}

// devel is the version of a binary that has neither a release stamp nor a
// module version (go run, or a build without version control information).
const devel = "(devel)"

// revision, commitTime and modified are set by make release with -ldflags
// "-X main.revision=<git rev-parse HEAD> -X main.commitTime=<its time>
// -X main.modified=true|false", for a
// tree whose commit Go cannot stamp itself: Go's build info has vcs.* only
// when the module sits in a checkout whose .git is a directory, not in a
// git worktree. The build info wins when it has them.
var revision, commitTime, modified string

// stamp is what -ldflags set ("" unset).
type stamp struct{ version, revision, time, modified string }

// readBuild is this binary's build, version from -ldflags winning over the
// build info (a release sets both to the same tag; a test binary has no
// module version).
func readBuild() build {
	info, _ := debug.ReadBuildInfo()
	return buildOf(stamp{version, revision, commitTime, modified}, info, runtime.GOOS+"/"+runtime.GOARCH)
}

// buildOf is the build that stamped (-ldflags) and info (nil when the
// binary carries none) describe, for a binary running on platform
// (GOOS/GOARCH).
func buildOf(stamped stamp, info *debug.BuildInfo, platform string) build {
	b := build{Version: stamped.version, Revision: stamped.revision, Time: stamped.time, Modified: stamped.modified == "true", GoVersion: runtime.Version(), Platform: platform}
	if info != nil {
		b.GoVersion = info.GoVersion
		if v := info.Main.Version; v != devel {
			b.Module = v
		}
		vcs := map[string]string{}
		for _, s := range info.Settings {
			vcs[s.Key] = s.Value
		}
		if rev, ok := vcs["vcs.revision"]; ok { // Go's own look at the checkout wins over a stamp
			b.Revision, b.Time, b.Modified = rev, vcs["vcs.time"], vcs["vcs.modified"] == "true"
		}
	}
	switch {
	case b.Version != "":
	case b.Module != "":
		b.Version = b.Module
	default:
		b.Version = devel
	}
	return b
}

// shortRevision is the first 7 hex digits of a commit, as `git log
// --oneline` shows it.
func shortRevision(rev string) string {
	if len(rev) > 7 {
		return rev[:7]
	}
	return rev
}

// String is the one line `sluice version` prints:
//
//	sluice 0.1.0 (commit 6bb2e53, dirty, go1.26.8 linux/amd64)
//
// without the commit when the binary does not know it, and "dirty" only
// for a checkout with uncommitted changes.
func (b build) String() string {
	var parts []string
	if b.Revision != "" {
		parts = append(parts, "commit "+shortRevision(b.Revision))
	}
	if b.Modified {
		parts = append(parts, "dirty")
	}
	parts = append(parts, b.GoVersion+" "+b.Platform)
	return "sluice " + b.Version + " (" + strings.Join(parts, ", ") + ")"
}

// long is every field, one "name: value" per line, for `sluice version -v`.
func (b build) long() string {
	or := func(s, none string) string {
		if s == "" {
			return none
		}
		return s
	}
	return fmt.Sprintf("version:  %s\nmodule:   %s\ncommit:   %s\ntime:     %s\nmodified: %t\ngo:       %s\nplatform: %s\n",
		b.Version, or(b.Module, devel), or(b.Revision, "unknown"), or(b.Time, "unknown"), b.Modified, b.GoVersion, b.Platform)
}

// printVersion is `sluice version [-v]` (also `sluice --version`, `sluice -v`).
func printVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	verbose := fs.Bool("v", false, "every field of the build, one per line: version, module version, full commit, commit time, dirty flag, Go version, platform")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("version: unexpected argument %q", fs.Arg(0))
	}
	b := readBuild()
	if *verbose {
		_, err := io.WriteString(stdout, b.long())
		return err
	}
	_, err := fmt.Fprintln(stdout, b)
	return err
}
