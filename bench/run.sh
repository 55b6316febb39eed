#!/usr/bin/env bash
# Side-by-side benchmark: agwire vs the official TypeScript (node) and Python
# SDKs, same workloads, one run. Installs the peers it needs, then runs
# `sidebyside` in release mode. Extra arguments go to sidebyside
# (--text-events N, --mixed-turns N, --node-client-limit N).
set -euo pipefail
cd "$(dirname "$0")/.."
(cd interop && npm ci --no-audit --no-fund --loglevel=error)
if [ ! -x bench/.venv/bin/python ]; then
  python3 -m venv bench/.venv
  bench/.venv/bin/pip install --quiet -r bench/python/requirements.txt
fi
cargo run --release --locked -p agwire-bench --bin sidebyside -- --python bench/.venv/bin/python "$@"
