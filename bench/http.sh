#!/usr/bin/env bash
# HTTP benchmarks on loopback, side by side, in one run:
#   agwire-server (bench_server) vs the Python reference server (FastAPI +
#   ag-ui-protocol EventEncoder, uvicorn) vs a node server with @ag-ui/encoder.
# Measures short runs/s (5 events per run; wrk, 64 connections), events/s of
# one long run (curl reading 1,000,000 events), and resident
# memory per idle open stream with 10,000 streams open (each server's RSS
# growth / streams, read from /proc).
# With AGWIRE_BEFORE=/path/to/an/older/bench_server, that binary is measured
# too (row "agwire (before)"), in the same run.
# Usage: bench/http.sh [seconds per wrk run (default 10)] [long-run events]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-10}
LONG=${2:-1000000}
command -v wrk >/dev/null || { apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }; }
(cd interop && npm ci --no-audit --no-fund --loglevel=error)
PY=$(./interop/python/setup-venv.sh)
# Built as the test command builds (scripts/build-env.sh), reusing its work.
source scripts/build-env.sh
cargo build --release --locked -p agwire-bench --bin bench_server --bin idle_streams
T=${CARGO_TARGET_DIR:-target}/$CARGO_BUILD_TARGET/release
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# start NAME CMD... : runs CMD, waits for "listening <port>" on its stdout.
start() {
  local name=$1; shift
  local log; log=$(mktemp)
  "$@" >"$log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do
    if grep -qE 'listening [0-9]+' "$log"; then break; fi
    sleep 0.1
  done
  PORT=$(grep -oE 'listening (http://[0-9.]+:)?[0-9]+' "$log" | grep -oE '[0-9]+$' | head -1)
  [ -n "$PORT" ] || { echo "$name did not start:" >&2; cat "$log" >&2; exit 1; }
  LASTPID=$!
}

bench_one() {
  local name=$1 port=$2 pid=$3
  local rps eps secs idle
  rps=$(wrk -t2 -c64 -d"${SECS}s" -s bench/http/post.lua "http://127.0.0.1:$port/short" | awk '/Requests\/sec/ {print $2}')
  secs=$(curl -s -o /dev/null -w '%{time_total}' -H 'content-type: application/json' \
    -H 'accept: text/event-stream' \
    -d '{"threadId":"t","runId":"r","state":{},"messages":[],"tools":[],"context":[],"forwardedProps":{}}' \
    "http://127.0.0.1:$port/long?n=$LONG")
  eps=$(awk -v n="$LONG" -v s="$secs" 'BEGIN {printf "%.0f", n / s}')
  idle=$("$T/idle_streams" --addr "127.0.0.1:$port" --path /idle --pid "$pid" --count "$IDLE_STREAMS" \
    | grep -oE '"kib_per_stream":[0-9.]+' | cut -d: -f2)
  printf '%s %s %s %s\n' "$name" "$rps" "$eps" "$idle"
}

IDLE_STREAMS=${IDLE_STREAMS:-10000}
RESULTS=$(mktemp)
start agwire "$T/bench_server" 127.0.0.1:0
bench_one agwire "$PORT" "$LASTPID" >>"$RESULTS"
kill "$LASTPID"
# A fresh process: memory freed by the streams above would be reused.
start agwire-events "$T/bench_server" 127.0.0.1:0
EVENTS_IDLE=$("$T/idle_streams" --addr "127.0.0.1:$PORT" --path /idle_events --pid "$LASTPID" --count "$IDLE_STREAMS" \
  | grep -oE '"kib_per_stream":[0-9.]+' | cut -d: -f2)
kill "$LASTPID"
if [ -n "${AGWIRE_BEFORE:-}" ]; then
  start agwire-before "$AGWIRE_BEFORE" 127.0.0.1:0
  bench_one agwire-before "$PORT" "$LASTPID" >>"$RESULTS"
  kill "$LASTPID"
fi
start node node interop/encoder-server.mjs --port 0
bench_one node "$PORT" "$LASTPID" >>"$RESULTS"
start python "$PY" interop/python/server.py --port 0
bench_one python "$PORT" "$LASTPID" >>"$RESULTS"

awk -v streams="$IDLE_STREAMS" '
  { name[NR]=$1; rps[NR]=$2; eps[NR]=$3; idle[NR]=$4 }
  END {
    printf "\n| server | short runs/s (5 events) | long run events/s | KiB per idle stream (%d open) | agwire runs/s = | agwire events/s = |\n|---|---|---|---|---|---|\n", streams
    for (i = 1; i <= NR; i++)
      printf "| %s | %.0f | %.0f | %.1f | %.1f× | %.1f× |\n", name[i], rps[i], eps[i], idle[i], rps[1] / rps[i], eps[1] / eps[i]
  }' "$RESULTS"
printf '\nagwire idle stream through EventStream (/idle_events): %s KiB each (%d open)\n' "$EVENTS_IDLE" "$IDLE_STREAMS"
