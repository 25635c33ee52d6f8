#!/bin/sh
# bench-table.sh OLD NEW [flags of `sluice-lab bench --ab`…]
#
# The README's bench table for two sluice binaries, A B A B: uniform keys
# (redis-benchmark) P1 and P16, Zipf tenants (2,000,000 keys, s = 1.1) P1
# and P16, abusers P16 and one hot key P16, each with Redis CPU and
# sluice's own CPU per decision, printed as medians OLD → NEW. OLD and NEW
# are sluice server binaries, started as `sluice serve`; the load
# generators, the direct side and the checks are sluice-lab, built from
# this checkout. Extra flags go to `sluice-lab bench --ab`: --requests
# (per run and side, default 50000), --rounds (of each binary, default 2),
# --clients, --cluster, --out.
# LABELS names the two binaries in the table (default old,new).
#
#   go build -o /tmp/old ./cmd/sluice   # at the old commit
#   go build -o /tmp/new ./cmd/sluice   # at the new one
#   scripts/bench-table.sh /tmp/old /tmp/new --out bench/results/table.md
set -eu
if [ $# -lt 2 ]; then
	sed -n '2,18s/^# \{0,1\}//p' "$0" >&2
	exit 2
fi
old=$1 new=$2
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
for tool in redis-server redis-cli redis-benchmark; do
	command -v "$tool" >/dev/null || { echo "bench-table.sh: $tool not on PATH (scripts/ensure-redis.sh installs it)" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && go build -o "$tmp/sluice-lab" ./cmd/sluice-lab)
"$tmp/sluice-lab" bench --ab "$old,$new" --ab-labels "${LABELS:-old,new}" "$@"
