#!/usr/bin/env bash
# The README's serve command, run as a newcomer runs it (./scripts/serve,
# embedded defaults; only the port and the data directory are fresh ones,
# through AGWIRE_ADDR and AGWIRE_DATA_DIR), and checked from outside with
# curl: /healthz answers, one run is accepted (202) and its stream read to
# its RUN_FINISHED, a path nothing serves is a JSON 404, and SIGTERM stops
# the service cleanly. Every wait is bounded. The last step of scripts/test,
# where the serve command must reuse the tests' build
# (AGWIRE_SERVE_CHECK_REUSE=0 skips that check when run on its own).
set -euo pipefail
cd "$(dirname "$0")/.."

dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
fail() {
  printf 'serve-check: %s\n--- agwire serve stderr (last 40 lines) ---\n' "$*" >&2
  tail -n 40 "$dir/stderr" >&2 || true
  exit 1
}

# Running, and not a zombie waiting to be reaped.
alive() {
  local state
  state=$(ps -o stat= -p "$pid" 2>/dev/null) && [[ $state != Z* ]]
}

# After the test command's build the serve command must compile nothing:
# the same profile, target and features (scripts/build-env.sh, the
# workspace-hack). A binary built anew here means they drifted apart.
source scripts/build-env.sh
binary="target/$CARGO_BUILD_TARGET/${AGWIRE_BUILD_PROFILE:-release}/agwire"
before=$(stat -c '%Y %i %s' "$binary" 2>/dev/null || echo none)

# `cargo run` execs the binary: $pid is agwire serve once it is built.
AGWIRE_ADDR=127.0.0.1:0 AGWIRE_DATA_DIR="$dir/data" ./scripts/serve >"$dir/stdout" 2>"$dir/stderr" &
pid=$!

# Its first line on stdout is where it listens. The build before it is
# normally what the tests left (same profile); a cold one is bounded too.
deadline=$(( $(date +%s) + 1800 ))
base=""
while [ -z "$base" ]; do
  alive || fail "exited before listening"
  [ "$(date +%s)" -lt "$deadline" ] || fail "not listening after 30 minutes"
  base=$(sed -n 's/^listening \(http:.*\)$/\1/p' "$dir/stdout" | head -n 1)
  [ -n "$base" ] || sleep 0.2
done
echo "listening at $base"
if [ "${AGWIRE_SERVE_CHECK_REUSE:-1}" = 1 ] && [ "$before" != "$(stat -c '%Y %i %s' "$binary")" ]; then
  fail "the serve command compiled the binary again instead of reusing the tests' build:
the workspace-hack is stale (run \`cargo hakari generate\`) or the profiles differ"
fi

health=$(curl -fsS --max-time 10 "$base/healthz") || fail "/healthz did not answer"
echo "healthz: $health"
case "$health" in *'"status":"ok"'*) ;; *) fail "unexpected /healthz: $health" ;; esac

thread=$(cat /proc/sys/kernel/random/uuid)
run='{"threadId":"'"$thread"'","runId":"serve-check","state":{},"messages":[{"id":"m1","role":"user","content":"what time is it?"}],"tools":[],"context":[],"forwardedProps":{"runtime_mode":"chat"}}'
status=$(curl -sS --max-time 10 -o "$dir/accepted" -w '%{http_code}' \
  -H 'content-type: application/json' -d "$run" "$base/api/v1/agent/runs") || fail "POST /api/v1/agent/runs failed"
[ "$status" = 202 ] || fail "POST /api/v1/agent/runs answered $status: $(cat "$dir/accepted")"

# The stream ends with the run's terminal event.
curl -fsS --max-time 60 "$base/api/v1/agent/runs/serve-check/events" >"$dir/events" ||
  fail "the run's stream did not end within 60 s"
grep -q '"type":"RUN_STARTED"' "$dir/events" || fail "no RUN_STARTED in the stream: $(head -c 2000 "$dir/events")"
tail -n 3 "$dir/events" | grep -q '"type":"RUN_FINISHED"' || fail "the stream does not end with RUN_FINISHED: $(tail -c 2000 "$dir/events")"
echo "run serve-check: $(grep -c '^data:' "$dir/events") events, RUN_STARTED … RUN_FINISHED"

status=$(curl -sS --max-time 10 -o "$dir/missing" -w '%{http_code}' "$base/api/v1/nope")
[ "$status" = 404 ] && grep -q '"detail"' "$dir/missing" || fail "GET /api/v1/nope answered $status: $(cat "$dir/missing")"

kill -TERM "$pid"
for _ in $(seq 1 300); do
  alive || break
  sleep 0.1
done
alive && fail "still running 30 s after SIGTERM"
wait "$pid" || fail "exited with status $? after SIGTERM"
echo "stopped cleanly by SIGTERM"
