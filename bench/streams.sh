#!/usr/bin/env bash
# Many concurrent idle event streams on ONE `agwire serve` (release build,
# built-in agent with `token_delay_ms = 3600000`, so every run stays running
# and its streams go idle after the first events; fresh SQLite data dir and
# server per phase; clients are bench bin stream_flood):
#   1. server RSS growth per GET /api/v1/agent/runs/{id}/events stream:
#      10,000 streams over 100 running runs (VmRSS before/after, after 100
#      warm-up streams were opened and closed);
#   2. the same for 10,000 streaming POST /api/v1/agent/runs, each on its
#      own new thread (each one a run executing on the server: `[runs]
#      max_concurrent` is raised so that none waits queued, since a queued
#      run sends no first event); and, on another fresh server, 10,000 runs
#      executing the same way with no stream (POST answered 202): the
#      difference is what the stream itself costs;
#   3. COUNT streams at once (POST_SHARE % streaming POSTs, the rest GET
#      events; spread over client processes of at most PER_CLIENT streams,
#      each on its own loopback source address 127.0.0.10, .11, … since one
#      address has ~28k ephemeral ports and one process 20k fds), held HOLD
#      seconds while a prober POSTs a new run (Accept: application/json,
#      202) every 100 ms on a new connection. Reported: streams open, server
#      RSS total and growth per stream over the server before the flood,
#      server CPU during the hold (/proc/PID/stat utime+stime, % of one
#      core), the lateness of every `: keep-alive` comment (time since the
#      stream's previous chunk minus the 15 s period, measured by the
#      client: client scheduling delay is included) p50/p99/max, new-run
#      latency (connect to 202 status line) p50/p99/max, and every failure
#      (an open that failed or a stream that ended while held, by reason).
# A stream is open once its response head (200) and first SSE event arrived.
# One server needs a file descriptor per stream: the soft RLIMIT_NOFILE is
# raised to the hard one; if that cannot hold COUNT, the largest count that
# fits (limit - 200) is run and said so, or with STRICT=1 the bench fails.
# Usage: bench/streams.sh [count (100000)] [hold seconds (45)]
#   env: STRICT=1, MEM_STREAMS (10000), POST_SHARE (10), PER_CLIENT (10000),
#        RUNS (100 runs to follow), MAX_CONCURRENT (20000)
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${1:-100000}
HOLD=${2:-45}
MEM_STREAMS=${MEM_STREAMS:-10000}
POST_SHARE=${POST_SHARE:-10}
PER_CLIENT=${PER_CLIENT:-10000}
RUNS=${RUNS:-100}
MAX_CONCURRENT=${MAX_CONCURRENT:-20000}
BIN=./target/release/agwire
FLOOD=./target/release/stream_flood
command -v jq >/dev/null || { apt-get install -y jq >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y jq >/dev/null; }; }
cargo build --release --locked -q -p agwire -p agwire-bench --bin agwire --bin stream_flood

# File descriptors: the server holds one per stream; children inherit this.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
LIMIT=$(ulimit -n)
FIT=$((LIMIT - 200))
REQUESTED=$COUNT
if [ "$COUNT" -gt "$FIT" ]; then
  echo "fd limit: RLIMIT_NOFILE is $LIMIT (hard; raising it needs CAP_SYS_RESOURCE), so one server holds at most $FIT streams; $COUNT requested"
  if [ "${STRICT:-0}" = 1 ]; then
    echo "STRICT=1: not running with fewer streams than asked" >&2
    exit 1
  fi
  echo "running with $FIT streams instead of $COUNT"
  COUNT=$FIT
fi
[ "$MEM_STREAMS" -le "$FIT" ] || MEM_STREAMS=$FIT
[ "$PER_CLIENT" -le $((LIMIT - 500)) ] || PER_CLIENT=$((LIMIT - 500))
[ "$HOLD" -ge 30 ] || echo "note: hold ${HOLD}s is less than two keep-alive periods (30 s)"

WORK=$(mktemp -d)
SERVER=""
CLIENTS=()
stop_server() {
  [ -n "$SERVER" ] || return 0
  kill "$SERVER" 2>/dev/null || true
  for _ in $(seq 30); do kill -0 "$SERVER" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$SERVER" 2>/dev/null || true
  wait "$SERVER" 2>/dev/null || true
  SERVER=""
}
stop_clients() {
  local pid
  for pid in "${CLIENTS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${CLIENTS[@]}"; do wait "$pid" 2>/dev/null || true; done
  CLIENTS=()
}
cleanup() {
  stop_clients
  [ -z "${PROBER:-}" ] || kill "$PROBER" 2>/dev/null || true
  stop_server
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rss() { awk '$1 == "VmRSS:" {print $2}' "/proc/$SERVER/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$SERVER/stat"; }
TCK=$(getconf CLK_TCK)

# A fresh server in $WORK/$1 with $RUNS running runs to follow ($DIR/runs).
start_server() {
  DIR="$WORK/$1"
  mkdir -p "$DIR"
  printf '[builtin]\ntoken_delay_ms = 3600000\n\n[runs]\nmax_concurrent = %s\n\n[http]\nmax_connections = 200000\n' "$MAX_CONCURRENT" > "$DIR/agwire.toml"
  RUST_LOG=error "$BIN" serve --addr 127.0.0.1:0 --data-dir "$DIR" --config "$DIR/agwire.toml" > "$DIR/out" 2> "$DIR/err" &
  SERVER=$!
  for _ in $(seq 200); do grep -q listening "$DIR/out" 2>/dev/null && break; sleep 0.05; done
  ADDR=$(sed -n 's/^listening http:\/\///p' "$DIR/out")
  [ -n "$ADDR" ] || { echo "agwire serve did not start:" >&2; cat "$DIR/err" >&2; exit 1; }
  "$FLOOD" create --addr "$ADDR" --count "$RUNS" --src 127.0.0.250 > "$DIR/runs"
}

# Phases 1 and 2: RSS growth per stream, each on a fresh server.
memory_phase() { # name kind src
  start_server "$1"
  "$FLOOD" open --addr "$ADDR" --kind "$2" --runs "$DIR/runs" --count "$MEM_STREAMS" \
    --src "$3" --pid "$SERVER" --warmup 100 > "$WORK/$1.json" 2> "$WORK/$1.err" || true
  [ -s "$WORK/$1.json" ] || { echo "stream_flood failed:" >&2; cat "$WORK/$1.err" >&2; exit 1; }
  cat "$WORK/$1.json"
  stop_server
}
echo "agwire serve ($BIN), fd limit $LIMIT; phase 1: $MEM_STREAMS GET-events streams"
memory_phase p1 events 127.0.0.2
echo "phase 2: $MEM_STREAMS streaming POSTs"
memory_phase p2 post 127.0.0.3
echo "phase 2b: $MEM_STREAMS runs executing, no stream"
start_server p2b
sleep 0.5
RUNS_BEFORE=$(rss)
"$FLOOD" create --addr "$ADDR" --count "$MEM_STREAMS" --src 127.0.0.5 > "$DIR/many" 2> "$DIR/many.err" \
  || { echo "creating runs failed:" >&2; cat "$DIR/many.err" >&2; exit 1; }
sleep 1
RUNS_AFTER=$(rss)
CREATED=$(wc -l < "$DIR/many")
PER_RUN=$(awk -v a="$RUNS_AFTER" -v b="$RUNS_BEFORE" -v n="$CREATED" 'BEGIN {printf "%.2f", n ? (a - b) / n : 0}')
echo "{\"runs\":$CREATED,\"rss_before_kib\":$RUNS_BEFORE,\"rss_after_kib\":$RUNS_AFTER,\"kib_per_run\":$PER_RUN}"
stop_server

# Phase 3: COUNT streams over several client processes, held HOLD seconds.
POSTS=$((COUNT * POST_SHARE / 100))
EVENTS=$((COUNT - POSTS))
start_server p3
BASE_RSS=$(rss)
launch() { # kind total
  local kind=$1 left=$2 procs n
  procs=$(((left + PER_CLIENT - 1) / PER_CLIENT))
  while [ "$left" -gt 0 ]; do
    n=$(((left + procs - 1) / procs))
    i=${#CLIENTS[@]}
    "$FLOOD" open --addr "$ADDR" --kind "$kind" --runs "$DIR/runs" --count "$n" \
      --src "127.0.0.$((10 + i))" --stop "$WORK/stop" --samples "$WORK/c$i.samples" \
      > "$WORK/c$i.json" 2> "$WORK/c$i.err" &
    CLIENTS+=($!)
    left=$((left - n))
    procs=$((procs - 1))
  done
}
echo "phase 3: $COUNT streams ($EVENTS GET events, $POSTS streaming POSTs), hold ${HOLD}s"
OPEN_START=$(date +%s.%N)
launch events "$EVENTS"
launch post "$POSTS"
for _ in $(seq 6000); do
  waiting=0
  for i in "${!CLIENTS[@]}"; do
    if ! grep -q '^opened' "$WORK/c$i.err" 2>/dev/null && kill -0 "${CLIENTS[$i]}" 2>/dev/null; then
      waiting=1
    fi
  done
  [ "$waiting" = 0 ] && break
  sleep 0.1
done
OPEN_SECS=$(awk -v s="$OPEN_START" -v e="$(date +%s.%N)" 'BEGIN {printf "%.0f", e - s}')
OPEN_RSS=$(rss)
CPU0=$(cpu_ticks)
T0=$(date +%s.%N)
"$FLOOD" probe --addr "$ADDR" --secs "$HOLD" --every-ms 100 --src 127.0.0.4 > "$WORK/probe.json" 2> "$WORK/probe.err" &
PROBER=$!
wait "$PROBER" || true
PROBER=""
CPU1=$(cpu_ticks)
T1=$(date +%s.%N)
END_RSS=$(rss)
touch "$WORK/stop"
NCLIENTS=${#CLIENTS[@]}
for pid in "${CLIENTS[@]}"; do wait "$pid" || true; done
CLIENTS=()
stop_server

for i in $(seq 0 $((NCLIENTS - 1))); do
  [ -s "$WORK/c$i.json" ] || { echo "client $i printed nothing:" >&2; cat "$WORK/c$i.err" >&2; }
  cat "$WORK/c$i.json"
done
cat "$WORK/probe.json"
[ -s "$WORK/probe.json" ] || cat "$WORK/probe.err" >&2

CJSON=$(cat "$WORK"/c*.json)
sum() { echo "$CJSON" | jq -s "map($1) | add // 0"; }
OPENED=$(sum .opened)
STILL=$(sum .still_open)
KA_STREAMS=$(sum .streams_with_keepalive)
FAILED=$(sum .failed)
FAILURES=$(echo "$CJSON" | jq -cs '[.[].failures | to_entries[]] | group_by(.key) | map({(.[0].key): (map(.value) | add)}) | add // {}')
# Keep-alive lateness over all streams of all clients.
read -r LN LP50 LP99 LMAX LMIN < <(cat "$WORK"/c*.samples | sort -g | awk '
  {v[NR] = $1}
  END {
    if (NR == 0) {print 0, 0, 0, 0, 0; exit}
    p50 = int(NR * 0.50 + 0.999999); p99 = int(NR * 0.99 + 0.999999)
    printf "%d %.1f %.1f %.1f %.1f\n", NR, v[p50], v[p99], v[NR], v[1]
  }')
PROBE=$(cat "$WORK/probe.json" 2>/dev/null || echo '{}')
pj() { echo "$PROBE" | jq -r "$1 // \"?\""; }
CPU=$(awk -v a="$CPU0" -v b="$CPU1" -v s="$T0" -v e="$T1" -v t="$TCK" 'BEGIN {printf "%.1f", (b - a) / t / (e - s) * 100}')
PER3=$(awk -v a="$OPEN_RSS" -v b="$BASE_RSS" -v n="$OPENED" 'BEGIN {printf "%.2f", n ? (a - b) / n : 0}')
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }
P1_FAILED=$(jq -r .failed "$WORK/p1.json")
P2_FAILED=$(jq -r .failed "$WORK/p2.json")

echo
echo "| agwire serve, one process ($(nproc) cores, fd limit $LIMIT) | |"
echo "| --- | --- |"
[ "$REQUESTED" = "$COUNT" ] || echo "| streams requested | $REQUESTED (fd limit: ran $COUNT) |"
echo "| 1. RSS per GET-events stream ($MEM_STREAMS streams) | $(jq -r .kib_per_stream "$WORK/p1.json") KiB ($P1_FAILED failed) |"
P2=$(jq -r .kib_per_stream "$WORK/p2.json")
echo "| 2. RSS per streaming POST, run executing ($MEM_STREAMS) | $P2 KiB ($P2_FAILED failed) |"
echo "| 2b. RSS per run executing without a stream ($CREATED) | $PER_RUN KiB |"
echo "| 2 − 2b: a streaming POST's stream itself | $(awk -v a="$P2" -v b="$PER_RUN" 'BEGIN {printf "%.2f", a - b}') KiB |"
echo "| 3. streams open ($EVENTS GET events + $POSTS POST, $NCLIENTS clients) | $OPENED of $COUNT in $OPEN_SECS s; $STILL still open after the ${HOLD} s hold |"
echo "| server RSS: before / all open / end of hold | $(mib "$BASE_RSS") / $(mib "$OPEN_RSS") / $(mib "$END_RSS") MiB |"
echo "| server RSS growth per stream | $PER3 KiB |"
echo "| server CPU during the hold | $CPU % of one core |"
echo "| keep-alive lateness p50 / p99 / max (min) | $LP50 / $LP99 / $LMAX ms ($LMIN); $LN comments, $KA_STREAMS of $OPENED streams got one |"
echo "| new run (POST -> 202) p50 / p99 / max | $(pj .latency_ms.p50) / $(pj .latency_ms.p99) / $(pj .latency_ms.max) ms ($(pj .accepted) of $(pj .runs) accepted) |"
echo "| failures | $FAILED streams $FAILURES; prober $(pj .failed) $(echo "$PROBE" | jq -c '.failures // {}') |"
[ "$FAILED" = 0 ] && [ "$P1_FAILED" = 0 ] && [ "$P2_FAILED" = 0 ] && [ "$(pj .failed)" = 0 ]
