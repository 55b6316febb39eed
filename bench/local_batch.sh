#!/usr/bin/env bash
# Many chats at once on one local model, agwire beside llama.cpp's own
# `llama-server` (bench bin local_batch): for N = 1, 4, 8 concurrent
# requests (a ~300-token prompt, 128 tokens, greedy, 3 rounds), aggregate
# tokens/s, time to first token p50/p99 and the peak RSS of the process
# that runs the model. One fresh process (and server) per N.
#
#   bench/local_batch.sh MODEL.gguf [LLAMA_SERVER] [OLD_LOCAL_BATCH]
#
# LLAMA_SERVER: a llama-server binary built from the llama.cpp that
# llama-cpp-sys-2 vendors (same kernels), run as
# `-t 2 -np N -c 4096×N -cb` (each sequence 4,096 tokens, as agwire's
# `context`). OLD_LOCAL_BATCH: this bench built from another checkout (the
# build before a change), run the same way.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?MODEL.gguf}
server=${2:-}
old=${3:-}
threads=${THREADS:-2}
rounds=${ROUNDS:-3}
source scripts/build-env.sh
cargo build --release -q -p agwire-bench --bin local_batch
bench=target/$CARGO_BUILD_TARGET/release/local_batch
port=18181
pid=
trap '[ -z "$pid" ] || kill "$pid" 2>/dev/null || true' EXIT
if curl -sf "http://127.0.0.1:$port/health" >/dev/null; then
  echo "port $port is taken (a llama-server left running?)" >&2; exit 1
fi

for n in 1 4 8; do
  echo "== N=$n"
  "$bench" agwire "$model" "$n" "$threads" "$rounds" | tail -1 | sed 's/^/agwire:       /'
  if [ -n "$old" ]; then
    "$old" agwire "$model" "$n" "$threads" "$rounds" | tail -1 | sed 's/^/agwire (old): /'
  fi
  if [ -n "$server" ]; then
    "$server" -m "$model" -t "$threads" -np "$n" -c $((4096 * n)) -cb \
      --host 127.0.0.1 --port $port --no-webui >/tmp/llama-server.log 2>&1 &
    pid=$!
    for _ in $(seq 600); do
      curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
      sleep 0.1
    done
    "$bench" server "http://127.0.0.1:$port" "$pid" "$n" "$rounds" | tail -1 | sed 's/^/llama-server: /'
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
  fi
done
