// Package bench measures what sluice costs: it runs redis-benchmark against
// sluice (RL.TAKE), against a second sluice in embedded mode (the same
// RL.TAKE decided in process: the front end's ceiling) and, alternately,
// straight at the Redis Cluster shards (EVALSHA of the same token-bucket
// script with the same policy), and reports requests per second, latency,
// the CPU Redis spends per decision on each side, the CPU sluice spends per
// decision (and how much of it the store path adds to the embedded mode's),
// and how sluice batched: commands per store pipeline, decisions per script
// call.
//
// Run does it all in one call: it starts a local Redis Cluster
// (internal/localredis) and a `sluice serve` child process unless it is given
// running ones, and an embedded `sluice serve` child, loads the script on every primary, checks with one call of
// each command that the replies have the expected shape, runs the rounds,
// and writes a markdown table and an SVG bar chart.
//
// Every run is checked, not only timed: redis-benchmark 7 stops at the first
// error reply (and Run fails with its output), a sluice run must be decided
// by the store for every request (INFO decided_by_store; in the hot-lease
// scenario by the store or a leased token, decided_by_store +
// decided_by_lease), an embedded run in process (decided_by_embedded), and a direct uniform run must reach every primary
// (INFO commandstats), so a benchmark cannot quietly measure fallback
// answers or one shard.
//
// RunLab runs the experiments of `sluice-lab` on one rig: it starts the
// cluster (or takes the user's), writes the policy file, starts and stops
// the sluice processes, drives the load (drive) and collects the replies,
// and renders the report from templates/<lab>.md.tmpl. A lab file holds
// only its experiment: its config, its rows, the fault it injects. The
// experiments: global (is the limit global?), partition (the owning
// primary frozen), restart (flushed, restarted, failed over), latency
// (what one decision costs), hot (one hot key in each hot-key mode),
// overload (a surge of clients), regions (per-region budgets of a global
// one); Soak runs mixed load with faults on the same rig.
//
// The package is one house of rooms, each a set of files named for it:
//
//   - rig*.go, the one rig: RunLab, the cluster, the policy file and the
//     sluice processes stopped by pid (rig.go, rig_child.go), the cluster as
//     a store with its script loaded (rig_store.go), the load (rig_load.go),
//     redis-benchmark runs and their output (rig_redisbench.go), CPU from
//     /proc (rig_proc.go).
//   - report_*.go, the one report writer: the labs' Markdown templates and
//     the number formats they use (report_render.go), the SVG chart
//     (report_svg.go).
//   - cli.go, the command lines of `sluice-lab bench` and every `sluice-lab`
//     experiment, declared on the flag set cmd/sluice-lab parses.
//   - bench*.go, `sluice-lab bench`: Run and its report (bench.go,
//     bench_config.go, bench_report.go); RunFronts, the doors driven side by
//     side (bench_fronts*.go); RunWorkloads, `--keys uniform|zipf:S` and
//     `--workload tenants,abuse`: one raw-RESP load generator drives RL.TAKE
//     through sluice and EVALSHA to the owning primary at the same depth,
//     each row with the primaries' CPU per decision (bench_workload*.go).
//   - lab_<name>*.go, one experiment each (a large one in several files,
//     all named for it).
//   - results/, the checked-in reports, each written by its command with
//     --out bench/results/<name>.md (and `sluice-lab bench --svg
//     bench/results/results.svg`).
//
// One package, not sub-packages: every experiment uses the rig's and the
// report writer's unexported pieces, which a bench/rig or bench/report
// would have to export to no reader's gain; the file names show the rooms.
//
// What it must not do: put wall-clock thresholds in tests, signal a process
// it did not start (the sluice child and the cluster are stopped by their
// own pids), or run without a bound (every redis-benchmark run has a request
// count and Config.RunTimeout). CPU is read from /proc, so the CPU columns
// are Linux-only; elsewhere they read n/a.
package bench
