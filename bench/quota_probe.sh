#!/usr/bin/env bash
# One `agwire serve` replica on PostgreSQL at QUOTA% of one core (a cgroup's
# CPU quota, as bench/replicas.sh's quota rows), whole runs (POST -> the
# run's SSE stream to its end) at each concurrency in CONCS: runs/s, the
# replica's CPU per run (utime + stime from /proc) and its context switches
# per run. Why: bench/replicas.sh's split quota row gives each of two
# replicas half the connections, and a replica's CPU per run rises as its
# concurrency falls; this shows by how much, and (STRACE=1) which system
# calls per run make the difference.
#
# Usage: [QUOTA=10] [CONCS="8 16"] [STRACE=1 | PERF=1] [THREADS=1] bench/quota_probe.sh [seconds (10)]
# AGWIRE_BIN: the agwire binary to measure (default: this tree's release
# build). STRACE=1 writes `strace -c -f` of the replica per concurrency to
# $OUT_DIR (default: a temporary directory, printed) and slows it.
# PERF=1 writes `perf record` of the replica per concurrency there instead
# (PERF_HZ: its frequency, 4999; PERF_ARGS: more, e.g. "--call-graph
# dwarf"). THREADS=1 adds the replica's CPU per run by thread name. Each
# line also gives the log rows (writes) and events per run.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-10}
Q=${QUOTA:-10}
PG=${AGWIRE_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}
command -v wrk >/dev/null || { apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }; }
[ -w /sys/fs/cgroup/cpu ] && [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ] || { echo "quota_probe: needs cgroup v1's cpu controller, writable" >&2; exit 1; }
source scripts/build-env.sh
BIN=${AGWIRE_BIN:-}
if [ -z "$BIN" ]; then
  cargo build --release -q -p agwire --bin agwire
  BIN=${CARGO_TARGET_DIR:-./target}/$CARGO_BUILD_TARGET/release/agwire
fi
WORK=$(mktemp -d)
OUT_DIR=${OUT_DIR:-$WORK/out}
mkdir -p "$OUT_DIR"
name="agwire_probe_$RANDOM$RANDOM"
cg=/sys/fs/cgroup/cpu/agwire-probe-$$
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done; fi
  rmdir "$cg" 2>/dev/null || true
  psql "$PG" -qc "DROP DATABASE IF EXISTS $name WITH (FORCE)" >/dev/null 2>&1 || true
  [ -n "${STRACE:-}${PERF:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
psql "$PG" -qc "CREATE DATABASE $name"
mkdir "$cg"
echo $(( Q * 1000 )) > "$cg/cpu.cfs_quota_us"
RUST_LOG=error sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' sh "$cg" \
  "$BIN" serve --addr 127.0.0.1:0 --data-dir "$WORK" --database-url "${PG%/*}/$name" > "$WORK/serve.out" &
pid=$!
for _ in $(seq 200); do grep -q listening "$WORK/serve.out" 2>/dev/null && break; sleep 0.05; done
addr=$(sed -n 's/^listening http:\/\///p' "$WORK/serve.out")
[ -n "$addr" ] || { echo "quota_probe: the replica did not start" >&2; cat "$WORK/serve.out" >&2; exit 1; }
tick=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
switches() {
  cat /proc/"$pid"/task/*/status | awk '/^voluntary_ctxt_switches/ {v += $2} /^nonvoluntary_ctxt_switches/ {n += $2} END {print v, n}'
}
# CPU ticks by thread name (threads of one name summed), for THREADS=1.
by_thread() { for t in /proc/"$pid"/task/*; do printf '%s %s\n' "$(tr ' ' _ < "$t/comm")" "$(awk '{print $14 + $15}' "$t/stat")"; done | awk '{s[$1] += $2; n[$1]++} END {for (k in s) print k "×" n[k], s[k]}' | sort; }
# The log so far: its rows and events (a row is one write of a run's events).
logged() { psql "${PG%/*}/$name" -Atqc "SELECT COUNT(*), COALESCE(SUM(n_events), 0) FROM run_events" | tr '|' ' '; }
# Warm-up: connections made, statements prepared.
AGWIRE_BENCH_STREAM=1 wrk -t1 -c8 -d3s -s bench/http/service.lua "http://$addr" >/dev/null
printf 'one replica at %s%% of a core, whole runs, wrk for %ss each (%s)\n' "$Q" "$SECS" "$BIN"
for c in ${CONCS:-8 16}; do
  c0=$(cpu); read -r v0 n0 < <(switches); read -r r0 e0 < <(logged); [ -z "${THREADS:-}" ] || by_thread > "$WORK/threads0"
  if [ -n "${STRACE:-}" ]; then
    strace -c -f -p "$pid" -o "$OUT_DIR/strace-c$c.txt" 2>/dev/null & tracer=$!
  elif [ -n "${PERF:-}" ]; then
    perf record -q -F ${PERF_HZ:-4999} ${PERF_ARGS:-} -p "$pid" -o "$OUT_DIR/perf-c$c.data" 2>/dev/null & tracer=$!
  fi
  out=$(AGWIRE_BENCH_STREAM=1 wrk -t1 -c"$c" -d"${SECS}s" -s bench/http/service.lua "http://$addr")
  if [ -n "${STRACE:-}${PERF:-}" ]; then kill -INT "$tracer"; wait "$tracer" 2>/dev/null || true; fi
  c1=$(cpu); read -r v1 n1 < <(switches); read -r r1 e1 < <(logged); [ -z "${THREADS:-}" ] || by_thread > "$WORK/threads1"
  if echo "$out" | grep -q "Non-2xx or 3xx responses"; then echo "$out" >&2; echo "quota_probe: non-2xx answers" >&2; exit 1; fi
  runs=$(echo "$out" | awk '/requests in/ {print $1}')
  rps=$(echo "$out" | awk '/Requests\/sec/ {printf "%.0f", $2}')
  awk -v c="$c" -v rps="$rps" -v runs="$runs" -v cpu=$(( c1 - c0 )) -v tick="$tick" \
      -v vol=$(( v1 - v0 )) -v invol=$(( n1 - n0 )) -v rows=$(( r1 - r0 )) -v events=$(( e1 - e0 )) 'BEGIN {
    printf "  c%-3s %6s runs/s   replica %4.0f us per run   context switches per run: %.2f voluntary, %.2f involuntary   log rows per run %.2f (events %.1f)\n",
      c, rps, cpu * 1e6 / tick / runs, vol / runs, invol / runs, rows / runs, events / runs }'
  if [ -n "${THREADS:-}" ]; then
    join "$WORK/threads0" "$WORK/threads1" | awk -v runs="$runs" -v tick="$tick" '$3 > $2 {printf "       %-24s %4.0f us per run\n", $1, ($3 - $2) * 1e6 / tick / runs}'
  fi
done
[ -z "${STRACE:-}" ] || echo "strace -c per concurrency: $OUT_DIR"
