#!/usr/bin/env bash
# demo.sh ECWORKER: starts a local in-memory Azurite on free ports, points
# ecworker at it and runs the demo, then stops Azurite.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
AZURITE="$ROOT/tests/node_modules/.bin/azurite"
AZURITE_DIR="$(dirname "$bin")"
AZURITE_LOG="$AZURITE_DIR/demo-azurite.log"
# shellcheck source=tests/azurite.sh
source "$ROOT/tests/azurite.sh"
trap azurite_stop EXIT
azurite_start
export AZURE_STORAGE_CONNECTION_STRING="$ECW_TEST_CONNECTION_STRING"
"$bin" demo
