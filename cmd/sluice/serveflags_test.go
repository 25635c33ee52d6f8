package main

import (
	"bytes"
	"errors"
	"flag"
	"regexp"
	"slices"
	"testing"

	"github.com/sluice-rl/sluice/app"
)

// TestServeHelpIsTheTable: every flag `sluice serve -h` prints is in the
// table of app/config.go (and so in docs/flags.md), and every flag of the
// table is printed.
func TestServeHelpIsTheTable(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(t.Context(), []string{"serve", "-h"}, &out, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("serve -h: %v, want flag.ErrHelp", err)
	}
	var printed []string
	for _, m := range regexp.MustCompile(`(?m)^  -(\S+)`).FindAllStringSubmatch(out.String(), -1) {
		printed = append(printed, m[1])
	}
	table := slices.Sorted(slices.Values(app.FlagNames()))
	if !slices.Equal(printed, table) {
		t.Errorf("serve -h prints %q\nthe table has %q", printed, table)
	}
	if len(table) < 50 {
		t.Errorf("%d flags in the table: too few to be all of serve's", len(table))
	}
}
