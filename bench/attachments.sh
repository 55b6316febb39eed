#!/usr/bin/env bash
# Attachments through `agwire serve` (release build, fresh SQLite data dir)
# against a bucket beside it (SeaweedFS's S3 gateway on loopback, from
# interop/seaweedfs), one run, side by side:
#   1. upload throughput of a 5 MiB image, sequential: into the service
#      with no bucket (a file beside SQLite) and with the bucket (streamed
#      into it);
#   2. download throughput of it: through the service (its signed URL)
#      and straight from the bucket (the presigned URL the service handed
#      out) — the replica out of the path;
#   3. the service's RSS (VmRSS, sampled every 20 ms) before and at its
#      peak during 20 concurrent 10 MiB uploads: into the bucket, and with
#      no bucket (where an upload is read whole before it is stored).
# Usage: bench/attachments.sh [uploads and downloads per case (default 20)]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-20}
source scripts/build-env.sh
OUT=${CARGO_TARGET_DIR:-./target}/$CARGO_BUILD_TARGET/release
BIN=${AGWIRE_BIN:-$OUT/agwire}
cargo build --release -q -p agwire --bin agwire
WEED=$(./interop/seaweedfs/setup-venv.sh 2>/dev/null)
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done; done
  rm -rf "$WORK"
}
trap cleanup EXIT

# Free loopback ports, as many as asked.
ports() { python3 -c "
import socket, sys
s = [socket.socket() for _ in range(int(sys.argv[1]))]
for x in s: x.bind(('127.0.0.1', 0))
print(' '.join(str(x.getsockname()[1]) for x in s))" "$1"; }

export AWS_ACCESS_KEY_ID=agwire-bench AWS_SECRET_ACCESS_KEY=agwire-bench-secret AWS_REGION=us-east-1
read -r -a P <<<"$(ports 12)"
mkdir -p "$WORK/weed"
"$WEED" mini -dir="$WORK/weed" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
  -master.port="${P[0]}" -master.port.grpc="${P[1]}" -volume.port="${P[2]}" -volume.port.grpc="${P[3]}" \
  -filer.port="${P[4]}" -filer.port.grpc="${P[5]}" -s3.port="${P[6]}" -s3.port.grpc="${P[7]}" \
  -admin.port="${P[8]}" -admin.port.grpc="${P[9]}" -s3.port.iceberg="${P[10]}" -s3.port.lance="${P[11]}" \
  -admin.ui=false -webdav=false -bucket=agwire >"$WORK/weed.log" 2>&1 &
PIDS+=($!)
export AWS_ENDPOINT_URL="http://127.0.0.1:${P[6]}"
for _ in $(seq 600); do curl -s -o /dev/null "$AWS_ENDPOINT_URL" && break; sleep 0.1; done

# Starts `agwire serve` (args: its extra args); sets BASE and SERVER.
serve() {
  local dir; dir=$(mktemp -d -p "$WORK")
  RUST_LOG=error "$BIN" serve --addr 127.0.0.1:0 --data-dir "$dir" "$@" >"$dir/out" &
  SERVER=$!
  PIDS+=("$SERVER")
  for _ in $(seq 600); do grep -q listening "$dir/out" 2>/dev/null && break; sleep 0.05; done
  BASE=$(sed -n 's/^listening //p' "$dir/out")
}

# A PNG by its signature, then seeded noise.
image() { { printf '\x89PNG\r\n\x1a\n'; head -c $(( $1 - 8 )) /dev/urandom; } >"$2"; }
image $((5 * 1024 * 1024)) "$WORK/5m.png"
image $((10 * 1024 * 1024)) "$WORK/10m.png"

# MiB/s of N sequential requests made by "$@" (one curl each, its body
# 5 MiB either way).
rate() {
  local start end
  start=$(date +%s.%N)
  for _ in $(seq "$N"); do "$@"; done
  end=$(date +%s.%N)
  python3 -c "print(f'{$N * 5 / ($end - $start):.0f} MiB/s')"
}
upload() { curl -sf -o "$WORK/answer" -H 'content-type: image/png' --data-binary @"$WORK/5m.png" "$BASE/api/v1/agent/attachments"; }
fetch() { curl -sf -o /dev/null "$1"; }

serve
echo "5 MiB image, $N each, sequential (curl on loopback):"
printf '  upload, no bucket (file beside SQLite):   %s\n' "$(rate upload)"
signed=$(python3 -c "import json; print(json.load(open('$WORK/answer'))['url'])" )
printf '  download through the service:             %s\n' "$(rate fetch "$signed")"

serve --attachments-url s3://agwire/bench
printf '  upload into the bucket (streamed):        %s\n' "$(rate upload)"
presigned=$(python3 -c "import json; print(json.load(open('$WORK/answer'))['url'])" )
case "$presigned" in "$AWS_ENDPOINT_URL"/*) ;; *) echo "not a presigned bucket URL: $presigned" >&2; exit 1 ;; esac
printf '  download by presigned URL (the bucket):   %s\n' "$(rate fetch "$presigned")"

rss() { awk '/^VmRSS/ {print $2}' "/proc/$SERVER/status"; }
# 20 concurrent 10 MiB uploads to $BASE; prints the service's RSS before
# and at its peak.
concurrent_uploads() {
  local before peak now failed=0
  before=$(rss); peak=$before
  : >"$WORK/uploads"
  for _ in $(seq 20); do
    curl -sf -o /dev/null -H 'content-type: image/png' --data-binary @"$WORK/10m.png" "$BASE/api/v1/agent/attachments" &
    echo $! >>"$WORK/uploads"
  done
  running() { while read -r pid; do kill -0 "$pid" 2>/dev/null && return 0; done <"$WORK/uploads"; return 1; }
  while running; do
    now=$(rss); [ "$now" -gt "$peak" ] && peak=$now
    sleep 0.02
  done
  while read -r pid; do wait "$pid" || failed=$((failed + 1)); done <"$WORK/uploads"
  [ "$failed" = 0 ] || { echo "$failed of the 20 uploads failed" >&2; exit 1; }
  printf 'RSS before %d MiB, peak %d MiB (+%d MiB, %.1f MiB per upload)' \
    $((before / 1024)) $((peak / 1024)) $(((peak - before) / 1024)) "$(python3 -c "print(($peak - $before) / 1024 / 20)")"
}
echo "20 concurrent 10 MiB uploads (200 MiB sent), the service's RSS:"
printf '  into the bucket (streamed):               %s\n' "$(concurrent_uploads)"
serve
printf '  no bucket (read whole, then a file):      %s\n' "$(concurrent_uploads)"
