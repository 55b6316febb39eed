#!/usr/bin/env bash
# `agwire serve` on SQLite (one process) and on PostgreSQL (one replica, two
# replicas), the same workload as bench/service.sh, side by side in one run:
#   accepted runs/s (POST -> 202, runs executing), end-to-end runs/s (POST
#   -> the run's whole SSE stream), accepted runs/s with execution held
#   (accepts alone), and the latency a token gains from the provider to
#   the SSE frame (token_latency) on each store;
# then PostgreSQL's own floors on the same server at the same concurrency:
# pgbench's simple-update TPS (-N), and pgbench writing a run's own rows in
# the service's schema (bench/pg_floor: accepts, whole runs), and one token's
# append committed alone (its latency: the token floor on PostgreSQL).
#
# With two replicas, one wrk per replica takes half the connections (a
# load balancer's round-robin) and their rates are summed. Scaling on this
# 2-core machine: on two cores shared with PostgreSQL and wrk, a second
# replica adds no CPU, so the "quota" rows give each replica a CPU budget of
# its own — QUOTA% of one core (default 20), a cgroup's CPU quota — small
# enough that the replicas, not PostgreSQL or wrk, are what limits: one
# replica against two, as replicas on machines of their own would be.
# Two 2-replica quota rows: the connections split between them (the same
# clients), and each replica given as many as the one replica had (twice
# the clients) — the first halves each replica's write groups.
# (Without a writable cgroup CPU controller those rows are skipped, said.)
#
# Usage: bench/replicas.sh [seconds per wrk run (10)] [connections (16)]
# AGWIRE_BIN: the agwire binary to measure (default: this tree's build;
# token_latency is always this tree's).
# QUOTA: each replica's share of one core in the quota rows (20).
# ROUNDS: how many times the quota rows are measured, each printed as its
# median with every round's figures (3).
# AGWIRE_BENCH_PG_URL: a PostgreSQL server to create databases on
# (default postgres://postgres@127.0.0.1:5432/postgres).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-10}
CONNS=${2:-16}
PG=${AGWIRE_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}
command -v wrk >/dev/null || { apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }; }
# Built as the test command builds (scripts/build-env.sh), reusing its work.
source scripts/build-env.sh
OUT=${CARGO_TARGET_DIR:-./target}/$CARGO_BUILD_TARGET/release
cargo build --release -q -p agwire -p agwire-bench --bin agwire --bin token_latency
# AGWIRE_BIN: another agwire binary to measure (an older build, to compare
# in the same run); default: this tree's release build.
BIN=${AGWIRE_BIN:-$OUT/agwire}
WORK=$(mktemp -d)
# Replicas' pids and the benchmark's databases, one per line (written from
# the subshells that start them).
touch "$WORK/pids" "$WORK/dbs" "$WORK/cgroups"
stop_all() {
  while read -r pid; do kill "$pid" 2>/dev/null || true; done < "$WORK/pids"
  while read -r pid; do while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done; done < "$WORK/pids"
  : > "$WORK/pids"
}
# Drops the benchmark's databases so far: a later figure is not measured
# beside the autovacuum and the writeback of an earlier figure's rows (the
# token latency measured right after the held accepts' databases saw p99
# 6 ms, on a fresh server 1.2-1.4 ms). DROP DATABASE ends in a checkpoint.
drop_databases() {
  while read -r db; do psql "$PG" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true; done < "$WORK/dbs"
  : > "$WORK/dbs"
}
cleanup() {
  stop_all
  drop_databases
  while read -r cg; do rmdir "$cg" 2>/dev/null || true; done < "$WORK/cgroups"
  rm -rf "$WORK"
}
trap cleanup EXIT

# A fresh database; prints its URL.
database() {
  local name="agwire_bench_$RANDOM$RANDOM"
  psql "$PG" -qc "CREATE DATABASE $name" >/dev/null
  echo "$name" >> "$WORK/dbs"
  echo "${PG%/*}/$name"
}

# Starts a replica (args: serve's extra args); prints its address.
replica() {
  local dir; dir=$(mktemp -d -p "$WORK")
  RUST_LOG=error "$BIN" serve --addr 127.0.0.1:0 --data-dir "$dir" "$@" > "$dir/out" &
  echo $! >> "$WORK/pids"
  for _ in $(seq 200); do grep -q listening "$dir/out" 2>/dev/null && break; sleep 0.05; done
  sed -n 's/^listening http:\/\///p' "$dir/out"
}

# The cgroup CPU controller: v1's directory, or v2's root when it delegates
# `cpu`; empty when neither is writable.
CGROUP_CPU=""
if [ -w /sys/fs/cgroup/cpu ] && [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
  CGROUP_CPU=v1
elif [ -w /sys/fs/cgroup ] && grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
  CGROUP_CPU=v2
fi

# Starts a replica limited to $1% of one core (a cgroup of its own), then
# serve's extra args; prints its address.
replica_quota() {
  local quota=$1; shift
  local dir; dir=$(mktemp -d -p "$WORK")
  local cg
  if [ "$CGROUP_CPU" = v1 ]; then
    cg=/sys/fs/cgroup/cpu/agwire-bench-$$-$RANDOM
    mkdir "$cg"; echo "$cg" >> "$WORK/cgroups"
    echo $(( quota * 1000 )) > "$cg/cpu.cfs_quota_us"
  else
    cg=/sys/fs/cgroup/agwire-bench-$$-$RANDOM
    mkdir "$cg"; echo "$cg" >> "$WORK/cgroups"
    echo "$(( quota * 1000 )) 100000" > "$cg/cpu.max"
  fi
  # The shell joins the cgroup, then becomes the replica.
  RUST_LOG=error sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' sh "$cg" \
    "$BIN" serve --addr 127.0.0.1:0 --data-dir "$dir" "$@" > "$dir/out" &
  echo $! >> "$WORK/pids"
  for _ in $(seq 200); do grep -q listening "$dir/out" 2>/dev/null && break; sleep 0.05; done
  sed -n 's/^listening http:\/\///p' "$dir/out"
}

# Waits until no run is queued or running (the store's counts, any replica).
settle() {
  for _ in $(seq 1200); do
    [ "$(curl -s "http://$1/metrics" | awk '$1 == "agwire_runs{status=\"running\"}" || $1 == "agwire_runs{status=\"queued\"}" {s += $2} END {print s + 0}')" = 0 ] && return
    sleep 0.1
  done
}

# wrk against every address at once (connections split evenly); prints the
# summed requests/s, and fails on any non-2xx.
load() {
  local stream=$1; shift
  local n=$#
  local per=$(( CONNS / n ))
  local outs=() wrks=()
  for addr in "$@"; do
    local out; out=$(mktemp -p "$WORK")
    outs+=("$out")
    AGWIRE_BENCH_STREAM=$stream wrk -t1 -c"$per" -d"${SECS}s" -s bench/http/service.lua "http://$addr" > "$out" &
    wrks+=($!)
  done
  wait "${wrks[@]}"
  for out in "${outs[@]}"; do
    if grep -q "Non-2xx or 3xx responses" "$out"; then cat "$out" >&2; echo "bench: non-2xx answers" >&2; exit 1; fi
  done
  cat "${outs[@]}" | awk '/Requests\/sec/ {s += $2} END {printf "%.0f", s}'
}

# One row: label, then the replicas' addresses.
row() {
  local label=$1; shift
  local accepted e2e
  accepted=$(load 0 "$@")
  settle "$1"
  e2e=$(load 1 "$@")
  settle "$1"
  printf '  %-44s %10s %10s\n' "$label" "$accepted" "$e2e"
}

# What the runs' logs came to on PostgreSQL: rows per run (one per write)
# and events per run — the floor's whole runs (bench/pg_floor/run.sql) write
# as many (WRITES, from the 2-replica row). (An older binary's schema has
# no n_events: then rows only.)
log_shape() {
  local shape
  WRITES=$(psql "$1" -Atc "SELECT greatest(round(count(*)::numeric / greatest(count(DISTINCT task_id), 1)), 1) FROM run_events")
  shape=$(psql "$1" -Atc "SELECT round(count(*)::numeric / greatest(count(DISTINCT task_id), 1), 2) || ' log rows, ' || round(sum(n_events)::numeric / greatest(count(DISTINCT task_id), 1), 1) || ' events per run' FROM run_events" 2>/dev/null) \
    || shape=$(psql "$1" -Atc "SELECT round(count(*)::numeric / greatest(count(DISTINCT task_id), 1), 2) || ' log rows per run' FROM run_events")
  printf '  %-44s %s\n' "" "($shape)"
}

printf 'agwire serve, wrk -c%s for %ss per figure (router+worker pipeline on the scripted model)\n' "$CONNS" "$SECS"
printf '  %-44s %10s %10s\n' "" "accepted/s" "e2e runs/s"
a=$(replica)
row "SQLite, 1 process" "$a"
stop_all; drop_databases
url=$(database); a=$(replica --database-url "$url")
row "PostgreSQL, 1 replica" "$a"
log_shape "$url"
stop_all; drop_databases
url=$(database); a=$(replica --database-url "$url"); b=$(replica --database-url "$url")
row "PostgreSQL, 2 replicas" "$a" "$b"
log_shape "$url"
stop_all; drop_databases
Q=${QUOTA:-20}
if [ -n "$CGROUP_CPU" ]; then
  # Noisy at a fraction of a core: ROUNDS rounds (3), each row's median.
  # The second 2-replica row gives each replica the connections one
  # replica had (a load balancer in front of twice the clients): with the
  # connections split, each replica's groups are half as large, and a
  # group's round trip is a replica's own cost too.
  rounds=${ROUNDS:-3}
  one=() split=() each=()
  for _ in $(seq "$rounds"); do
    url=$(database); a=$(replica_quota "$Q" --database-url "$url")
    one+=("$(row "" "$a")")
    stop_all; drop_databases
    url=$(database); a=$(replica_quota "$Q" --database-url "$url"); b=$(replica_quota "$Q" --database-url "$url")
    split+=("$(row "" "$a" "$b")")
    each+=("$(CONNS=$((CONNS * 2)) row "" "$a" "$b")")
    stop_all; drop_databases
  done
  python3 - "$Q" "$CONNS" "$rounds" "${one[*]}" "${split[*]}" "${each[*]}" <<'PY'
import statistics, sys
q, conns, rounds = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = [[int(x) for x in arg.split()] for arg in sys.argv[4:7]]
def medians(row):
    return statistics.median(row[0::2]), statistics.median(row[1::2])
one, split, each = (medians(r) for r in rows)
labels = [f"PostgreSQL, 1 replica at {q}% (median of {rounds})",
          f"PostgreSQL, 2 replicas at {q}%, c{conns} split",
          f"PostgreSQL, 2 replicas at {q}%, c{conns} each"]
for label, (acc, e2e), raw in zip(labels, (one, split, each), rows):
    print(f"  {label:<44} {acc:10.0f} {e2e:10.0f}   (rounds: {' '.join(map(str, raw))})")
print(f"  1 -> 2 replicas at {q}%: {split[0] / one[0]:.2f}x accepted, {split[1] / one[1]:.2f}x e2e "
      f"(connections split); {each[0] / one[0]:.2f}x, {each[1] / one[1]:.2f}x (c{conns} each)")
PY
  stop_all; drop_databases
else
  echo "  (quota rows skipped: no writable cgroup CPU controller)"
fi

# Accepts alone, compared with the floors' accepts: every run's execution
# held after its first events (the built-in agent waits an hour per
# token), so past `runs.max_concurrent` the accepts write queued runs,
# the floors' accept rows, and nothing else competes for the store.
printf 'accepted/s with execution held (runs wait after their first events), wrk -c%s for %ss:\n' "$CONNS" "$SECS"
HELD=(--builtin-token-delay-ms 3600000)
a=$(replica "${HELD[@]}")
printf '  %-44s %10s\n' "SQLite, 1 process" "$(load 0 "$a")"
stop_all; drop_databases
url=$(database); a=$(replica --database-url "$url" "${HELD[@]}")
printf '  %-44s %10s\n' "PostgreSQL, 1 replica" "$(load 0 "$a")"
stop_all; drop_databases
url=$(database); a=$(replica --database-url "$url" "${HELD[@]}"); b=$(replica --database-url "$url" "${HELD[@]}")
printf '  %-44s %10s\n' "PostgreSQL, 2 replicas" "$(load 0 "$a" "$b")"
stop_all; drop_databases

echo "token latency, provider chunk -> SSE frame (token_latency 5 200):"
printf '  SQLite:     %s\n' "$("$OUT/token_latency" 5 200 | tail -1)"
url=$(database)
printf '  PostgreSQL: %s\n' "$(AGWIRE_DATABASE_URL=$url "$OUT/token_latency" 5 200 | tail -1)"

url=$(database)
pgbench -q -i -s 10 "$url" >/dev/null 2>&1
tps=$(pgbench -N -c "$CONNS" -j 2 -T "$SECS" "$url" 2>/dev/null | awk '/^tps/ {printf "%.0f", $3}')
printf 'pgbench simple-update (-N, -c%s -j2, scale 10) on the same server: %s TPS\n' "$CONNS" "$tps"

# PostgreSQL's floor for a run's own rows (bench/pg_floor/*.sql): the
# service's schema (migrated by a replica started on it, then stopped), one
# transaction per accept, three per whole run (the commits the contract
# needs: bench/pg_floor/run.sql), at the same concurrency.
floor_sql() {
  pgbench -n -c "$CONNS" -j 2 -T "$SECS" -D "writes=${WRITES:-1}" -f "bench/pg_floor/$1.sql" "$2" 2>/dev/null | awk '/^tps/ {printf "%.0f", $3}'
}
url=$(database); replica --database-url "$url" >/dev/null; stop_all
printf 'pgbench with a run'"'"'s rows (bench/pg_floor, -c%s -j2) on the same server: accepts %s TPS, whole runs (log in %s row(s)) %s TPS\n' \
  "$CONNS" "$(floor_sql accept "$url")" "${WRITES:-1}" "$(floor_sql run "$url")"

# A token's floor on PostgreSQL: what one append writes (bench/pg_floor/
# append.sql), one client, each transaction's latency logged — the commit a
# token waits for before it is published, with nothing of the service
# around it. Beside token_latency's PostgreSQL row above.
psql "$url" -qc "INSERT INTO threads (id, user_id, created_at, last_active_at) VALUES ('floor-append', 'local', 0, 0);
  INSERT INTO runs (task_id, user_id, thread_id, run_id, request_hash, created_thread, status, input, created_at, runtime_mode)
  VALUES ('floor-append', 'local', 'floor-append', 'floor-append', 'hash', true, 'running', '{}', 0, 'chat')" >/dev/null
(cd "$WORK" && pgbench -n -c 1 -T "$SECS" -l --log-prefix=append -f "$OLDPWD/bench/pg_floor/append.sql" "$url" >/dev/null 2>&1)
printf 'one append'"'"'s commit (bench/pg_floor/append.sql, pgbench -c1, the token floor on PostgreSQL): %s\n' \
  "$(cat "$WORK"/append.* | awk '{print $3}' | sort -n | awk '{v[NR] = $1} END {printf "p50 %d us, p90 %d us, p99 %d us (%d commits)", v[int(NR * 0.5)], v[int(NR * 0.9)], v[int(NR * 0.99)], NR}')"
