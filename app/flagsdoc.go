package app

import (
	"flag"
	"fmt"
	"strings"
)

// FlagNames are the names of every serve flag in the table, file forms
// included, in the table's order.
func FlagNames() []string {
	var names []string
	for _, r := range (&Config{}).rows() {
		for _, n := range []string{r.flag, r.file} {
			if n != "" {
				names = append(names, n)
			}
		}
	}
	return names
}

// FlagsMarkdown is docs/flags.md: the table of serve flags, rendered.
// TestFlagsDoc fails when the file differs; `go test ./app -run
// TestFlagsDoc -update` rewrites it.
func FlagsMarkdown() string {
	c := &Config{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	c.register(fs, map[string]*string{})
	var b strings.Builder
	b.WriteString(`# sluice serve: flags

Generated from the one table of app/config.go (Config.rows); do not edit:
run ` + "`go test ./app -run TestFlagsDoc -update`" + ` after changing a flag.

A value with more than one source takes the first of these that has one:

1. its file form (` + "`--requirepass-file FILE`" + `): the file's text without
   trailing newlines; an empty or unreadable file stops sluice at start;
2. its flag, given on the command line with a non-empty value;
3. its environment variable, when set and not empty;
4. its field in the ` + "`--config`" + ` file (` + "`timeout:`" + `), when above zero,
   read at start and again on every reload (SIGHUP);
5. its default.

| flag | environment | file form | --config | default | meaning |
| --- | --- | --- | --- | --- | --- |
`)
	for _, r := range c.rows() {
		name, def, help := "", "", r.fileHelp
		if r.flag != "" {
			f := fs.Lookup(r.flag)
			name, help = fmt.Sprintf("`--%s`", r.flag), r.help
			if f.DefValue != "" {
				def = "`" + f.DefValue + "`"
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", name, code(r.env), code(suffix(r.file, "--", " FILE")),
			code(suffix(r.yaml, "", ":")), def, mdEscape.Replace(help))
	}
	return b.String()
}

// mdEscape keeps a help text plain in a markdown table cell.
var mdEscape = strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;")

// suffix is prefix+s+end, or "" for no s.
func suffix(s, prefix, end string) string {
	if s == "" {
		return ""
	}
	return prefix + s + end
}

// code is s in backquotes, or "" for no s.
func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + s + "`"
}
