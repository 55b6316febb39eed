#!/usr/bin/env bash
# Creates (or refreshes, when requirements.txt changed) the venv of the
# LangGraph peer (ag-ui-langgraph + LangGraph + FastAPI + uvicorn) and prints
# the path of its python: python/setup-venv.sh, for this directory.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec "$here/../python/setup-venv.sh" "$here"
