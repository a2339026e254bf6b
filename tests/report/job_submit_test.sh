#!/bin/sh
# Runs etc/job_submit.lua under lua5.1 against a stand-in slurm table.
# Usage: job_submit_test.sh JOB_SUBMIT_LUA TEST_LUA [PILOT]. With PILOT, the
# batch script `PILOT run --dry-run` prints (the C++ spelling of the bound
# run's script) is handed to the test, which must see the script admit it.
# Exit 77 without lua5.1.
LUA=$(command -v lua5.1 || true)
if [ -z "$LUA" ]; then
  echo "SKIP: lua5.1 is not installed (Debian package lua5.1)"
  exit 77
fi
script=""
if [ -n "${3:-}" ]; then
  script=$(mktemp)
  trap 'rm -f "$script"' EXIT
  "$3" run --dry-run 4242 -- --reservation=pilot_4242 | sed '1d;$d' >"$script" || exit 1
fi
"$LUA" "$2" "$1" "$script"
