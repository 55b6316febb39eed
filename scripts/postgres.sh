#!/usr/bin/env bash
# A PostgreSQL server for the tests, and its admin URL on stdout.
#
# The server at $AGWIRE_TEST_PG_URL (default: the machine's own,
# postgres://postgres@127.0.0.1:5432/postgres, trust auth) when it answers;
# otherwise a private cluster of this checkout (target/postgres, port
# 55432, trust auth on loopback only), started — after installing Debian's
# postgresql when its binaries are absent. Used by scripts/test, which then
# requires the PostgreSQL tests to run (AGWIRE_REQUIRE_PG=1).
set -euo pipefail
cd "$(dirname "$0")/.."

url=${AGWIRE_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}
if [ "${AGWIRE_PG_PRIVATE:-0}" != 1 ] && command -v psql >/dev/null \
  && psql "$url" -Atqc 'select 1' >/dev/null 2>&1; then
  echo "$url"
  exit 0
fi

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
if [ -z "$bin" ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "postgres.sh: installing Debian's postgresql" >&2
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >&2
  bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
fi

port=55432
data="$PWD/target/postgres"
private="postgres://postgres@127.0.0.1:$port/postgres"
# PostgreSQL refuses to run as root: the cluster belongs to the
# `postgres` user the package created.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
if [ ! -f "$data/PG_VERSION" ]; then
  mkdir -p "$data"
  [ "$(id -u)" -ne 0 ] || chown postgres "$data"
  as_owner "$bin/initdb" -D "$data" -U postgres -A trust >/dev/null
fi
if ! "$bin/pg_isready" -q -h 127.0.0.1 -p "$port"; then
  as_owner "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w \
    -o "-p $port -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off" start >&2
fi
echo "$private"
