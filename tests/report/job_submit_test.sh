#!/bin/sh
# Runs etc/job_submit.lua under lua5.1 against a stand-in slurm table.
# Usage: job_submit_test.sh JOB_SUBMIT_LUA TEST_LUA. Exit 77 without lua5.1.
LUA=$(command -v lua5.1 || true)
if [ -z "$LUA" ]; then
  echo "SKIP: lua5.1 is not installed (Debian package lua5.1)"
  exit 77
fi
exec "$LUA" "$2" "$1"
