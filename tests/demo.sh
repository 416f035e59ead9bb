#!/usr/bin/env bash
# demo.sh ECWORKER: starts a local in-memory Azurite on free ports, points
# ecworker at it and runs the demo, then stops Azurite.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$1
source "$here/azurite.sh"
azurite_start "$(dirname "$bin")/demo-azurite.log"
trap azurite_stop EXIT
export AZURE_STORAGE_CONNECTION_STRING="$AZURITE_CONNECTION_STRING"
echo "Azurite is listening: queue port $AZURITE_QUEUE_PORT, table port $AZURITE_TABLE_PORT"
"$bin" demo
