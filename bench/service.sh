#!/usr/bin/env bash
# `agwire serve` under load on loopback (release build, built-in agent, fresh
# SQLite data dir):
#   1. accepted runs/s — POST → 202 on a new thread each, runs executing in
#      the background (wrk, bench/http/service.lua);
#   2. end-to-end runs/s — POST with Accept: text/event-stream on a new
#      thread each, each response the run's whole stream (the same script
#      with AGWIRE_BENCH_STREAM=1);
#   Every request's thread and run are new (ids seeded from /dev/urandom);
#   the bench fails if wrk saw any answer but a 2xx.
#   3. events appended/s during (2), from /metrics;
#   4. reconnect → first replayed event, p50/p99 (bench bin service_reconnect);
#   5. the server's CPU time per run (user + system, from /proc) in (1) and
#      in (2), each run's execution included (the figure that moves least
#      from one machine or one run to the next).
# Usage: bench/service.sh [seconds per wrk run (default 10)] [connections (default 16)]
# What the service does beside the runs (each off unless set):
#   AGWIRE_BENCH_USERS=N     N users (HS256 tokens, taken in turn by the
#                            requests) instead of the one local user;
#   AGWIRE_BENCH_QUOTAS=1    [quotas] on, at limits the load never reaches
#                            (1,000 runs per minute and 10^15 tokens a day
#                            per user: every check is made, none refuses);
#   AGWIRE_BENCH_WEBHOOKS=1  [webhooks] on, to a receiver on loopback that
#                            answers 204 (bench bin webhook_sink); the
#                            deliveries are counted after the load.
#   AGWIRE_BENCH_TELEMETRY=R traces and metrics exported over OTLP/HTTP to
#                            the same receiver (it answers 200 unread),
#                            traces sampled at ratio R (1 = every run,
#                            0.1 = one in ten); spans exported and dropped
#                            are reported after the load.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-10}
CONNS=${2:-16}
command -v wrk >/dev/null || { apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }; }
# Built as the test command builds (scripts/build-env.sh), reusing its work.
source scripts/build-env.sh
OUT=${CARGO_TARGET_DIR:-./target}/$CARGO_BUILD_TARGET/release
# AGWIRE_BIN: another agwire binary to measure (an older build, to compare
# in the same run); default: this tree's release build.
BIN=${AGWIRE_BIN:-$OUT/agwire}
cargo build --release -q -p agwire -p agwire-bench --bin agwire --bin service_reconnect --bin webhook_sink
DATA=$(mktemp -d)
SINK_PID=
trap 'kill $PID $SINK_PID 2>/dev/null || true; rm -rf "$DATA"' EXIT
TOML="$DATA/agwire.toml"
: > "$TOML"
if [ -n "${AGWIRE_BENCH_USERS:-}" ]; then
  export AGWIRE_JWT_SECRET=bench-secret-0123456789abcdef
  python3 - "$AGWIRE_JWT_SECRET" "$AGWIRE_BENCH_USERS" > "$DATA/tokens" <<'PY'
import base64, hashlib, hmac, json, sys
secret, users = sys.argv[1].encode(), int(sys.argv[2])
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=")
head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
for i in range(users):
    body = b64(json.dumps({"sub": f"user{i}", "exp": 4000000000}).encode())
    sig = b64(hmac.new(secret, head + b"." + body, hashlib.sha256).digest())
    print((head + b"." + body + b"." + sig).decode())
PY
  export AGWIRE_BENCH_TOKENS="$DATA/tokens"
  printf '[metrics]\npublic = true\n' >> "$TOML"
fi
if [ "${AGWIRE_BENCH_QUOTAS:-}" = 1 ]; then
  printf '[quotas]\nruns_per_minute = 1000\ntokens_per_day = 1000000000000000\n' >> "$TOML"
fi
if [ "${AGWIRE_BENCH_WEBHOOKS:-}" = 1 ] || [ -n "${AGWIRE_BENCH_TELEMETRY:-}" ]; then
  "$OUT/webhook_sink" > "$DATA/sink" &
  SINK_PID=$!
  for _ in $(seq 100); do grep -q listening "$DATA/sink" 2>/dev/null && break; sleep 0.05; done
  SINK=$(sed -n 's/^listening //p' "$DATA/sink")
fi
if [ "${AGWIRE_BENCH_WEBHOOKS:-}" = 1 ]; then
  printf '[webhooks]\nurl = "%s/hook"\nsecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"\nallow_private = true\n' "$SINK" >> "$TOML"
fi
if [ -n "${AGWIRE_BENCH_TELEMETRY:-}" ]; then
  export OTEL_EXPORTER_OTLP_ENDPOINT=$SINK OTEL_TRACES_SAMPLER=parentbased_traceidratio \
    OTEL_TRACES_SAMPLER_ARG=$AGWIRE_BENCH_TELEMETRY
fi
CONFIG=()
[ -s "$TOML" ] && CONFIG=(--config "$TOML")
RUST_LOG=error "$BIN" serve --addr 127.0.0.1:0 --data-dir "$DATA" "${CONFIG[@]}" > "$DATA/out" &
PID=$!
for _ in $(seq 100); do grep -q listening "$DATA/out" 2>/dev/null && break; sleep 0.05; done
BASE=$(sed -n 's/^listening //p' "$DATA/out")
ADDR=${BASE#http://}
metric() { curl -s "$BASE/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
settle() { for _ in $(seq 600); do [ "$(curl -s "$BASE/metrics" | awk '$1 == "agwire_runs{status=\"running\"}" || $1 == "agwire_runs{status=\"queued\"}" {s += $2} END {print s + 0}')" = 0 ] && return; sleep 0.1; done; }

# wrk's output, checked: a run of the benchmark that saw any answer but a
# success measured something else than it says.
load() {
  local out
  out=$(wrk "$@")
  if echo "$out" | grep -q "Non-2xx or 3xx responses"; then
    echo "$out" >&2
    echo "bench: wrk saw non-2xx answers; the figures would not be runs" >&2
    exit 1
  fi
  echo "$out"
}

# The server's CPU time so far, in clock ticks.
cpu() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
HZ=$(getconf CLK_TCK)
per_run() { awk -v c="$1" -v n="$2" -v hz="$HZ" 'BEGIN {printf "%.0f", c / hz / n * 1e6}'; }
cpu0=$(cpu); runs0=$(metric agwire_runs_accepted_total)
accepted=$(load -t1 -c"$CONNS" -d"${SECS}s" -s bench/http/service.lua "$BASE" | awk '/Requests\/sec/ {print $2}')
settle
cpu1=$(cpu); runs1=$(metric agwire_runs_accepted_total)
before=$(metric agwire_events_appended_total)
start=$(date +%s.%N)
e2e=$(AGWIRE_BENCH_STREAM=1 load -t1 -c"$CONNS" -d"${SECS}s" --latency -s bench/http/service.lua "$BASE")
settle
end=$(date +%s.%N)
cpu2=$(cpu); runs2=$(metric agwire_runs_accepted_total)
after=$(metric agwire_events_appended_total)
e2e_rps=$(echo "$e2e" | awk '/Requests\/sec/ {print $2}')
e2e_p50=$(echo "$e2e" | awk '$1 == "50%" {print $2}')
e2e_p99=$(echo "$e2e" | awk '$1 == "99%" {print $2}')
appended=$(awk -v a="$after" -v b="$before" -v s="$start" -v e="$end" 'BEGIN {printf "%.0f", (a - b) / (e - s)}')
if [ -n "${AGWIRE_BENCH_USERS:-}" ]; then
  reconnect="reconnect: not measured with users (it posts as the local user)"
else
  reconnect=$("$OUT/service_reconnect" "$ADDR" 2000)
fi
delivered=
if [ "${AGWIRE_BENCH_WEBHOOKS:-}" = 1 ]; then
  for _ in $(seq 600); do [ "$(metric agwire_webhooks_pending)" = 0 ] && break; sleep 0.1; done
  delivered=$(curl -s "$SINK/count")
fi
printf '%s serve (SQLite WAL, router+worker pipeline on the scripted model, wrk -t1 -c%s -d%ss)\n' "$BIN" "$CONNS" "$SECS"
printf '  users %s, quotas %s, webhooks %s, telemetry %s\n' "${AGWIRE_BENCH_USERS:-1 (local)}" "${AGWIRE_BENCH_QUOTAS:+on}" "${AGWIRE_BENCH_WEBHOOKS:+on}" "${AGWIRE_BENCH_TELEMETRY:+sampled at $AGWIRE_BENCH_TELEMETRY}"
if [ -n "${AGWIRE_BENCH_TELEMETRY:-}" ]; then
  printf '  spans exported %s, dropped: export failed %s, queue full %s (OTLP exports received: %s)\n' \
    "$(metric agwire_otel_spans_exported_total)" "$(metric 'agwire_otel_spans_dropped_total{reason="export_failed"}')" \
    "$(metric 'agwire_otel_spans_dropped_total{reason="queue_full"}')" "$(curl -s "$SINK/otlp-count")"
fi
[ -n "$delivered" ] && printf '  webhooks delivered (receiver count) / runs accepted: %s / %s, pending %s\n' "$delivered" "$(metric agwire_runs_accepted_total)" "$(metric agwire_webhooks_pending)"
printf '  accepted runs/s (POST -> 202, runs executing):  %s\n' "$accepted"
printf '  end-to-end runs/s (POST -> whole SSE stream):   %s  (latency p50 %s, p99 %s)\n' "$e2e_rps" "$e2e_p50" "$e2e_p99"
printf '  events appended/s during end-to-end:            %s\n' "$appended"
printf '  %s\n' "$reconnect"
printf '  server CPU per run (accept and execution):     %s us in accepted, %s us in end-to-end\n' \
  "$(per_run $((cpu1 - cpu0)) $((runs1 - runs0)))" "$(per_run $((cpu2 - cpu1)) $((runs2 - runs1)))"
