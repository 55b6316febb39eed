#!/usr/bin/env bash
# Where PostgreSQL's time goes in a whole run, statement by statement and
# wait by wait: `agwire serve` on PostgreSQL (one replica or several on one
# database), wrk -c16 whole runs (POST -> the run's SSE stream to its end)
# for SECS seconds, as bench/pg_split.sh STREAM=1 measures them. Prints
#   - runs/s, and PostgreSQL's and the replicas' CPU per run (from /proc);
#   - every statement the service ran (pg_stat_statements, nested ones
#     too): calls per run, rows per call (a group statement's runs per
#     group), execution µs per call and per run;
#   - what the service's backends were doing, sampled from
#     pg_stat_activity every 10 ms: on CPU, waiting for the replica
#     (Client:ClientRead), for the WAL (LWLock:WALWrite, IO:WALSync), for
#     the server-wide lock a NOTIFY takes until its commit (Lock:object),
#     by statement (A: the accept group, W: the write group);
# then, with the replicas stopped, the same statement table for the floor:
# pgbench writing a whole run's rows (bench/pg_floor/run.sql, its log in as
# many rows per run as the service's runs wrote), -c16 -j2.
# Needs pg_stat_statements loaded (shared_preload_libraries, a server
# restart); it says how when it is not, and changes no server setting.
# Usage: bench/pg_profile.sh [replicas (1)] [seconds (10)]
# AGWIRE_BIN: the agwire binary to measure (default: this tree's build).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1}
SECS=${2:-10}
PG=${AGWIRE_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}
if ! psql "$PG" -Atqc "SHOW shared_preload_libraries" | grep -q pg_stat_statements; then
  cat >&2 <<'EOF'
pg_profile: pg_stat_statements is not loaded. As the server's superuser:
  ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements';
  ALTER SYSTEM SET pg_stat_statements.track = 'all';
then restart the server; afterwards ALTER SYSTEM RESET both and restart again.
EOF
  exit 1
fi
[ "$(psql "$PG" -Atqc "SHOW pg_stat_statements.track")" = all ] ||
  echo "pg_profile: pg_stat_statements.track is not 'all': statements inside the functions are not listed" >&2
source bench/pg_replicas.sh agwire_profile
# The extension's view and reset function, in the server's database; dropped
# on exit when this script created it.
if [ -z "$(psql "$PG" -Atqc "SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'")" ]; then
  psql "$PG" -qc "CREATE EXTENSION pg_stat_statements" >/dev/null
  trap 'cleanup; psql "$PG" -qc "DROP EXTENSION IF EXISTS pg_stat_statements" >/dev/null 2>&1 || true' EXIT
fi
start_replicas "$N"
# The counts are reset server-wide (pg_stat_statements has no per-database
# reset here); only this database's statements are read.
reset() { psql "$PG" -Atqc "SELECT pg_stat_statements_reset()" >/dev/null; }
statements() {
  psql "$PG" -P pager=off -F $'\t' -Atc "
    SELECT s.calls, s.rows, s.total_exec_time, s.toplevel, regexp_replace(s.query, '\s+', ' ', 'g')
    FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
    WHERE d.datname = '$DB' AND s.calls > 0
    ORDER BY s.total_exec_time DESC LIMIT 20"
}
reset
pg0=$(ticks $(postgres)); rep0=$(ticks "${PIDS[@]}")
WRKS=()
for addr in "${ADDRS[@]}"; do
  AGWIRE_BENCH_STREAM=1 wrk -t1 -c$((16 / N)) -d"${SECS}s" -s bench/http/service.lua "$addr" >"$WORK/wrk-${#WRKS[@]}" &
  WRKS+=($!)
done
# Sampled while wrk runs (its first and last second left out), from one
# session: every 10 ms a fresh snapshot of pg_stat_activity.
sleep 1
psql "$PG" -Atq -c "CREATE TEMP TABLE waits (wait TEXT, what TEXT)" -c "
  DO \$\$
  DECLARE stop TIMESTAMPTZ := clock_timestamp() + make_interval(secs => $SECS - 2);
  BEGIN
    WHILE clock_timestamp() < stop LOOP
      PERFORM pg_stat_clear_snapshot();
      INSERT INTO waits
      SELECT COALESCE(wait_event_type || ':' || wait_event, 'CPU'),
             CASE WHEN query LIKE '%agwire_write_many%' THEN 'W'
                  WHEN query LIKE '%agwire_accept%' THEN 'A'
                  ELSE left(regexp_replace(query, '\s+', ' ', 'g'), 40) END
      FROM pg_stat_activity
      WHERE datname = '$DB' AND state = 'active' AND query NOT LIKE 'LISTEN%';
      PERFORM pg_sleep(0.01);
    END LOOP;
  END \$\$" -c "SELECT wait, what FROM waits" >"$WORK/waits"
wait "${WRKS[@]}"
pg1=$(ticks $(postgres)); rep1=$(ticks "${PIDS[@]}")
statements >"$WORK/service"
runs=$(cat "$WORK"/wrk-* | awk '/^ +[0-9]+ requests in/ {s += $1} END {print s}')
if grep -q "Non-2xx" "$WORK"/wrk-*; then echo "non-2xx answers" >&2; exit 1; fi
stop_replicas
writes=$(psql "$URL" -Atc "SELECT greatest(round(count(*)::numeric / greatest(count(DISTINCT task_id), 1)), 1) FROM run_events")
reset
floor=$(pgbench -n -c 16 -j 2 -T "$SECS" -f bench/pg_floor/run.sql -D "writes=$writes" "$URL" 2>/dev/null |
  awk '/^number of transactions actually processed/ {print $NF}' | cut -d/ -f1)
statements >"$WORK/floor"
python3 - "$SECS" "$HZ" "$runs" "$((pg1 - pg0))" "$((rep1 - rep0))" "$N" "$floor" "$WORK" <<'PY'
import collections, sys
secs, hz, runs, pg, rep, n, floor, work = (float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]),
    int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], int(sys.argv[7]), sys.argv[8])
print(f"{n} replica(s), whole runs: {runs / secs:.0f} runs/s; PostgreSQL {pg / hz / runs * 1e6:.0f} us "
      f"and the replicas {rep / hz / runs * 1e6:.0f} us of CPU per run")
def table(name, runs):
    print(f"\n{name}: statements by execution time ({runs} runs)")
    print(f"  {'calls/run':>9} {'rows/call':>9} {'us/call':>8} {'us/run':>7}  statement")
    total = 0.0
    for line in open(f"{work}/{name}"):
        calls, rows, ms, top, query = line.rstrip("\n").split("\t", 4)
        calls, rows, ms = int(calls), int(rows), float(ms)
        if query.startswith(("CREATE", "DROP", "SELECT greatest", "SELECT pg_stat")):
            continue
        per_run = ms * 1000 / runs
        if top == "t":
            total += per_run
        mark = "" if top == "t" else "  (inside)"
        print(f"  {calls / runs:9.2f} {rows / calls:9.1f} {ms * 1000 / calls:8.0f} {per_run:7.1f}  "
              f"{query[:88]}{mark}")
    print(f"  top-level statements' execution: {total:.0f} us per run")
table("service", runs)
waits = collections.Counter()
for line in open(f"{work}/waits"):
    if "|" in line:
        wait, what = line.rstrip("\n").split("|", 1)
        waits[(what, wait)] += 1
print("\nthe service's backends, sampled every 10 ms while wrk ran (share of samples per statement)")
by = collections.Counter()
for (what, _), k in waits.items():
    by[what] += k
for what, k in by.most_common(6):
    parts = ", ".join(f"{w} {c / k:.0%}" for (s, w), c in waits.most_common() if s == what)
    print(f"  {what} ({k} samples): {parts}")
table("floor", floor)
PY
