#!/usr/bin/env bash
# Regenerate src/schema.d.ts (or the file named by $1) from fleetmem's own /v1 OpenAPI document,
# written by the registry (fleetmem.transport.openapi.openapi_document, the same document that
# GET /v1/openapi.json serves on the full surface), with openapi-typescript from node_modules.
# PYTHON names the interpreter that imports fleetmem (default: the project's .venv).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$here/src/schema.d.ts}"
python="${PYTHON:-$root/.venv/bin/python}"
doc="$(mktemp --suffix=.json)"
trap 'rm -f "$doc"' EXIT
"$python" -c 'import json, sys
from fleetmem.transport.openapi import openapi_document
json.dump(openapi_document("full"), sys.stdout, indent=2)' > "$doc"
"$here/node_modules/.bin/openapi-typescript" "$doc" --output "$out" --silent
