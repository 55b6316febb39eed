#!/usr/bin/env bash
# Creates (or refreshes, when requirements.txt changed) the venv holding the
# pinned Python peer (ag-ui-protocol + FastAPI + uvicorn), and prints the path
# of its python. Used by scripts/test and bench/http.sh.
set -euo pipefail
# With a directory argument it does the same for that directory's
# requirements.txt (interop/langgraph uses it so).
here="$(cd "${1:-$(dirname "$0")}" && pwd)"
venv="$here/.venv"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt" >&2
  echo "$want" > "$stamp"
fi
echo "$venv/bin/python"
