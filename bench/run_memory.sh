#!/usr/bin/env bash
# Memory of an executing run on ONE `agwire serve` (release build, built-in
# agent with `token_delay_ms = 3600000`, so every run stays running after its
# first events; fresh SQLite data dir; no stream: each POST is answered 202):
# server RSS before and after RUNS runs were accepted and started (all of
# them: `[runs] max_concurrent` is above RUNS), and the growth per run —
# what an executing run costs: its task, its agent's future and context, the
# history given to it, its channels and buffers, its entries in the engine.
# Then RUNS more: the growth over the second RUNS is the marginal cost, once
# the bounded caches (SQLite's page caches, the allocator's arenas) have
# filled. Each binary gets its own fresh server, one after the other.
# Usage: bench/run_memory.sh [runs (10000)] [agwire binary ...]
#   (default binary: this tree's release build; pass an older build first to
#   compare, e.g. bench/run_memory.sh 10000 /tmp/agwire-old ./target/.../agwire)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-10000}
shift || true
source scripts/build-env.sh
OUT=${CARGO_TARGET_DIR:-./target}/$CARGO_BUILD_TARGET/release
cargo build --release -q -p agwire -p agwire-bench --bin agwire --bin stream_flood
BINS=("$@")
[ ${#BINS[@]} -gt 0 ] || BINS=("$OUT/agwire")
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
WORK=$(mktemp -d)
SERVER=""
stop_server() {
  [ -n "$SERVER" ] || return 0
  kill "$SERVER" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$SERVER" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$SERVER" 2>/dev/null || true
  wait "$SERVER" 2>/dev/null || true
  SERVER=""
}
trap 'stop_server; rm -rf "$WORK"' EXIT
rss() { awk '$1 == "VmRSS:" {print $2}' "/proc/$SERVER/status"; }
metric() { curl -s "http://$ADDR/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
for BIN in "${BINS[@]}"; do
  DIR=$(mktemp -d -p "$WORK")
  printf '[builtin]\ntoken_delay_ms = 3600000\n\n[runs]\nmax_concurrent = %s\n\n[http]\nmax_connections = 200000\n' "$((RUNS * 2))" > "$DIR/agwire.toml"
  RUST_LOG=error "$BIN" serve --addr 127.0.0.1:0 --data-dir "$DIR" --config "$DIR/agwire.toml" > "$DIR/out" 2> "$DIR/err" &
  SERVER=$!
  for _ in $(seq 200); do grep -q listening "$DIR/out" 2>/dev/null && break; sleep 0.05; done
  ADDR=$(sed -n 's/^listening http:\/\///p' "$DIR/out")
  [ -n "$ADDR" ] || { echo "agwire serve did not start:" >&2; cat "$DIR/err" >&2; exit 1; }
  # Warm-up: the allocator's arenas, the statement caches, the first pages.
  "$OUT/stream_flood" create --addr "$ADDR" --count 200 --src 127.0.0.5 > /dev/null
  sleep 1
  BEFORE=$(rss)
  batch() { # name src
    "$OUT/stream_flood" create --addr "$ADDR" --count "$RUNS" --src "$2" > "$DIR/$1" 2> "$DIR/$1.err" \
      || { echo "creating runs failed:" >&2; cat "$DIR/$1.err" >&2; exit 1; }
    # Every run started (running, none queued), then settled.
    for _ in $(seq 600); do
      [ "$(metric 'agwire_runs{status="queued"}')" = 0 ] && break
      sleep 0.1
    done
    sleep 1
  }
  batch first 127.0.0.5
  MIDDLE=$(rss)
  batch second 127.0.0.6
  AFTER=$(rss)
  RUNNING=$(metric 'agwire_runs{status="running"}')
  per() { awk -v a="$1" -v b="$2" -v n="$RUNS" 'BEGIN {printf "%.2f", (a - b) / n}'; }
  printf '%s: %s runs executing; RSS %s -> %s -> %s KiB: %s KiB per run over the first %s, %s KiB per run over the next %s\n' \
    "$BIN" "$RUNNING" "$BEFORE" "$MIDDLE" "$AFTER" "$(per "$MIDDLE" "$BEFORE")" "$RUNS" "$(per "$AFTER" "$MIDDLE")" "$RUNS"
  stop_server
done
