#!/usr/bin/env bash
# How long root's readers take on a results.json of many short keys (a file
# under the 16 MiB cap): the JSON reader must be linear in its input.
# CPU only; uses the build's `pilot report` and the report fixture.
# Usage: bench/parse-keys.sh [BUILD_DIR] [KEYS]   (defaults build, 1000000)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
keys=${2:-1000000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - tests/report/fixtures/results.json "$keys" "$work/results.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["stages"]["single"]["shape"].update({"k%d" % i: 0 for i in range(int(sys.argv[2]))})
open(sys.argv[3], "w").write(json.dumps(d))
PY
printf 'hardware_catalog = "%s/etc/hardware.toml"\nstate_dir = "%s/state"\n' "$PWD" "$work" >"$work/pilot.conf"
echo "results.json: $keys extra keys, $(stat -c %s "$work/results.json") bytes"
start=$(date +%s.%N)
timeout 600 "$build/cli/pilot" report --policy "$work/pilot.conf" "$work/results.json" -o "$work/r.html" || true
echo "pilot report: $(python3 -c "import sys; print('%.2f s' % (float(sys.argv[2]) - float(sys.argv[1])))" "$start" "$(date +%s.%N)")"
