// Package app is the running sluice server as a value: one Config, filled
// from one table of every serve flag (its environment variable, file form,
// --config field, default and help) by one precedence rule; New, Start,
// Reload and Shutdown; the admin endpoints (/metrics, /healthz, /readyz),
// INFO's sections and the reload of --config and --envoy-config.
//
// It wires the packages below it (doors, limiter, stores) and decides
// nothing itself. It must not read the process's flags, environment or
// signals: cmd/sluice does, and hands Load the arguments and os.Getenv,
// and calls Reload on SIGHUP. docs/flags.md is rendered from the table
// (FlagsMarkdown) and checked by TestFlagsDoc.
package app
