#!/usr/bin/env bash
# Resident memory of `agwire serve` over 10,000 runs (release build, scripted
# model, fresh SQLite data dir): ten rounds of 1,000 runs, each POSTed with
# Accept: text/event-stream and read to its end, RSS after each round. A
# service that keeps nothing per finished run is flat after warm-up.
# Usage: bench/service_memory.sh [rounds (10)] [runs per round (1000)] [clients (16)] [agwire binary]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-10}
PER=${2:-1000}
CLIENTS=${3:-16}
source scripts/build-env.sh
OUT=${CARGO_TARGET_DIR:-./target}/$CARGO_BUILD_TARGET/release
BIN=${4:-$OUT/agwire}
cargo build --release -q -p agwire -p agwire-bench --bin agwire --bin service_memory
DATA=$(mktemp -d)
trap 'kill $PID 2>/dev/null || true; rm -rf "$DATA"' EXIT
RUST_LOG=error "$BIN" serve --addr 127.0.0.1:0 --data-dir "$DATA" > "$DATA/out" &
PID=$!
for _ in $(seq 100); do grep -q listening "$DATA/out" 2>/dev/null && break; sleep 0.05; done
ADDR=$(sed -n 's/^listening http:\/\///p' "$DATA/out")
echo "agwire serve ($BIN), $ROUNDS rounds x $PER runs, $CLIENTS clients"
"$OUT/service_memory" "$ADDR" "$PID" "$ROUNDS" "$PER" "$CLIENTS"
