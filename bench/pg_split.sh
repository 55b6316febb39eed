#!/usr/bin/env bash
# Where the CPU goes while `agwire serve` on PostgreSQL accepts runs alone
# (execution held: the built-in agent waits an hour per token), one replica
# or two on one database, wrk -c16 POST → 202 for SECS seconds: cores used
# by PostgreSQL's backends (every `postgres` process) and by the replicas,
# from /proc (utime + stime), and their CPU time per accepted run. Then,
# on the same database and server, with the replicas stopped: PostgreSQL's
# CPU per accept for the same rows written by pgbench (bench/pg_floor/
# accept.sql, -c16 -j2), the floor the service's figure is held to, and
# their ratio (issue 47's goal: at most 1.2).
# With STREAM=1, whole runs instead: the runs execute and every POST reads
# its run's stream to the end (end to end), and the floor is a whole run's
# rows (bench/pg_floor/run.sql, its log in as many rows per run as the
# service's runs wrote).
# Usage: [STREAM=1] bench/pg_split.sh [replicas (2)] [seconds (10)]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-2}
SECS=${2:-10}
STREAM=${STREAM:-0}
HOLD=(--builtin-token-delay-ms 3600000)
[ "$STREAM" = 1 ] && HOLD=()
source bench/pg_replicas.sh agwire_split
start_replicas "$N" "${HOLD[@]}"
pg0=$(ticks $(postgres)); rep0=$(ticks "${PIDS[@]}")
WRKS=()
for addr in "${ADDRS[@]}"; do
  AGWIRE_BENCH_STREAM=$STREAM wrk -t1 -c$((16 / N)) -d"${SECS}s" -s bench/http/service.lua "$addr" >"$WORK/wrk-${#WRKS[@]}" &
  WRKS+=($!)
done
wait "${WRKS[@]}"
pg1=$(ticks $(postgres)); rep1=$(ticks "${PIDS[@]}")
runs=$(cat "$WORK"/wrk-* | awk '/^ +[0-9]+ requests in/ {s += $1} END {print s}')
if grep -q "Non-2xx" "$WORK"/wrk-*; then echo "non-2xx answers" >&2; exit 1; fi
# The floor: the same rows by pgbench, nothing else running.
stop_replicas
# pgbench's backends exit with it: their CPU is then in the postmaster's
# children's time (cutime + cstime), added here to the live processes'.
pg_total() { echo $(( $(ticks $(postgres)) + $(awk '{print $16 + $17}' "/proc/$(pgrep -o -x postgres)/stat") )); }
if [ "$STREAM" = 1 ]; then
  writes=$(psql "$URL" -Atc "SELECT greatest(round(count(*)::numeric / greatest(count(DISTINCT task_id), 1)), 1) FROM run_events")
  # (An older binary's schema, one row per event: the floor's rows are
  # this tree's, so its log goes in one row per write as this tree's runs'.)
  psql "$URL" -Atc "SELECT n_events FROM run_events LIMIT 0" >/dev/null 2>&1 || {
    psql "$URL" -qc "ALTER TABLE run_events RENAME COLUMN event TO events; ALTER TABLE run_events ADD COLUMN n_events INTEGER NOT NULL DEFAULT 1" >/dev/null
    writes=1
  }
  FLOOR=(-f bench/pg_floor/run.sql -D "writes=$writes") WHAT="whole runs, their logs in $writes row(s)"
else
  FLOOR=(-f bench/pg_floor/accept.sql) WHAT="accepts alone"
fi
f0=$(pg_total)
floor=$(pgbench -n -c 16 -j 2 -T "$SECS" "${FLOOR[@]}" "$URL" 2>/dev/null | awk '/^number of transactions actually processed/ {print $NF}' | cut -d/ -f1)
f1=$(pg_total)
python3 - "$SECS" "$HZ" "$runs" "$((pg1 - pg0))" "$((rep1 - rep0))" "$N" "$floor" "$((f1 - f0))" "$WHAT" "${FLOOR[1]}" <<'PY'
import sys
secs, hz, runs, pg, rep, n = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
floor, floor_pg = int(sys.argv[7]), int(sys.argv[8])
what, script = sys.argv[9], sys.argv[10]
service = pg / hz / runs * 1e6
print(f"{n} replica(s), {what}: {runs / secs:.0f} runs/s")
print(f"  PostgreSQL backends {pg / hz / secs:.2f} cores ({service:.0f} us per run), "
      f"replicas {rep / hz / secs:.2f} cores ({rep / hz / runs * 1e6:.0f} us per run)")
floor_us = floor_pg / hz / floor * 1e6
print(f"  floor ({script}, pgbench -c16 -j2): {floor / secs:.0f} runs/s, "
      f"PostgreSQL {floor_us:.0f} us per run; the service's = {service / floor_us:.2f}x the floor's")
PY
