# Sourced by bench/pg_split.sh and bench/pg_profile.sh: `agwire serve`
# replicas on one fresh PostgreSQL database, and the CPU they and the
# server use. Sets PG, BIN, WORK, DB, URL, HZ; `start_replicas N [serve
# flags…]` fills PIDS and ADDRS; `stop_replicas`; `ticks PID…` (utime +
# stime, in clock ticks); `postgres` (the server's pids). On exit the
# replicas are stopped and the database dropped.
# $1: the database's name prefix.
PG=${AGWIRE_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}
source scripts/build-env.sh
BIN=${AGWIRE_BIN:-}
if [ -z "$BIN" ]; then
  cargo build --release -q -p agwire --bin agwire
  BIN=${CARGO_TARGET_DIR:-./target}/$CARGO_BUILD_TARGET/release/agwire
fi
command -v wrk >/dev/null || { apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }; }
WORK=$(mktemp -d)
DB="${1}_$RANDOM$RANDOM"
PIDS=()
ADDRS=()
stop_replicas() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done; done
  PIDS=()
}
cleanup() {
  stop_replicas
  psql "$PG" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
psql "$PG" -qc "CREATE DATABASE $DB" >/dev/null
URL="${PG%/*}/$DB"
start_replicas() {
  local n=$1 i
  shift
  for i in $(seq "$n"); do
    mkdir -p "$WORK/$i"
    RUST_LOG=error "$BIN" serve --addr 127.0.0.1:0 --data-dir "$WORK/$i" --database-url "$URL" "$@" >"$WORK/$i/out" &
    PIDS+=($!)
    for _ in $(seq 200); do grep -q listening "$WORK/$i/out" 2>/dev/null && break; sleep 0.05; done
    ADDRS+=("$(sed -n 's/^listening //p' "$WORK/$i/out")")
  done
}
# (A process may exit between the listing and the read: it then adds 0.)
ticks() { local sum=0 pid t; for pid in "$@"; do t=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null) && sum=$((sum + t)); done; echo "$sum"; }
postgres() { pgrep -x postgres | tr '\n' ' '; }
HZ=$(getconf CLK_TCK)
