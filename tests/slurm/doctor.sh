#!/usr/bin/env bash
# pilot doctor on the local cluster's node (pilot(1), doctor): with the
# cluster's own slurm.conf, plugstack, prolog, epilog, job_submit.lua, state
# folder and keys, and podman allowed as the container cases allow it, every
# item holds (Yama, absent from some kernels, warns under the test policy's
# require_ptrace_scope = false) and it exits 0, on the node and through srun.
# Then one piece is taken away at a time, and put back before the next: the
# plugstack line, the key (gone, then readable by others), Yama (the policy
# requires it), podman (the policy's podman_path names no program); each
# time the report names that piece, as missing, with its fix, and exits 1.
#
#   doctor.sh CASE   CASE: node
#
# Environment as for e2e.sh (lib.sh).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

PORT=${PILOT_REGISTRY_PORT:-5000}
REG=127.0.0.1:$PORT
ROOTDIR=$(mktemp -d /tmp/pilot-doctor.XXXXXX)   # root's: the saved files, podman's store
# shellcheck source=tests/slurm/image_lib.sh
source "$(dirname "$0")/image_lib.sh"
PLUGSTACK=$CLUSTER/etc/plugstack.conf
cp -p "$POLICY" "$ROOTDIR/pilot.conf.saved"
cp -p "$PLUGSTACK" "$ROOTDIR/plugstack.conf.saved"
cp -p "$KEY" "$ROOTDIR/verdict.key.saved"

doctor_cleanup() {
  cp -p "$ROOTDIR/pilot.conf.saved" "$POLICY"
  cp -p "$ROOTDIR/plugstack.conf.saved" "$PLUGSTACK"
  cp -p "$ROOTDIR/verdict.key.saved" "$KEY"
  image_cleanup
  cleanup
}
trap doctor_cleanup EXIT

OUT=$TMP/doctor.out
# Runs pilot doctor as root on the node; its exit status in $rc, its
# report in $OUT.
doctor() {
  rc=0
  "$PILOT" doctor --policy "$POLICY" "$@" >"$OUT" 2>&1 || rc=$?
  sed 's/^/   | /' "$OUT" >&2
}

# The report's line of ITEM has STATUS and holds each of the WORDS.
expect_item() {  # expect_item ITEM STATUS [WORD...]
  local item=$1 status=$2 line
  shift 2
  line=$(grep "^pilot: doctor: $item: " "$OUT") || fail "no line for $item"
  [[ $line == "pilot: doctor: $item: $status: "* ]] || fail "$item is not $status: $line"
  local w
  for w in "$@"; do
    [[ $line == *"$w"* ]] || fail "$item's line lacks '$w': $line"
  done
}

case_node() {
  allow_podman
  local yama
  yama=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo -1)

  note "the cluster's node as local-slurm wired it: nothing missing"
  doctor
  ((rc == 0)) || fail "pilot doctor exited $rc on the cluster's node"
  local item
  for item in policy slurm.conf plugstack programs prolog epilog job_submit state key fanotify \
              capabilities podman gpus; do
    expect_item "$item" holds
  done
  expect_item plugstack holds "$PLUGSTACK:2" "spank_pilot.so"
  expect_item prolog holds "$CLUSTER/etc/prolog.sh runs $CLUSTER/bin/pilot-prolog" "PrologFlags=Alloc"
  expect_item epilog holds "$CLUSTER/bin/pilot-epilog"
  expect_item job_submit holds "$CLUSTER/etc/job_submit.lua" "$STATE/grants"
  expect_item podman holds "OCI runtime runc"
  if ((yama >= 1)); then
    expect_item ptrace_scope holds
  else
    expect_item ptrace_scope warn "require_ptrace_scope = false" "(fix: "
  fi
  grep -q ": missing: " "$OUT" && fail "an item is missing on the cluster's node"
  tail -n1 "$OUT" | grep -q "0 missing: this node can run a pilot" || fail "no summary line"

  note "--json: the same items for automation"
  doctor --json
  ((rc == 0)) || fail "pilot doctor --json exited $rc"
  [[ $(json "$OUT" 'd["schema"]') == slurm-pilot/doctor/1 ]] || fail "no schema"
  [[ $(json "$OUT" 'd["ready"]') == True ]] || fail "not ready in --json"
  [[ $(json "$OUT" '[i["status"] for i in d["items"] if i["name"]=="key"][0]') == holds ]] ||
    fail "the key does not hold in --json"

  note "through srun on the node, as an admin checks every node"
  rc=0
  srun -N1 -t 5 "$PILOT" doctor --policy "$POLICY" >"$OUT" 2>&1 || rc=$?
  sed 's/^/   | /' "$OUT" >&2
  ((rc == 0)) || fail "srun -N1 pilot doctor exited $rc"
  expect_item plugstack holds
  grep -q "this node can run a pilot" "$OUT" || fail "no summary through srun"

  note "no plugstack line: slurmd would not load the plugin"
  sed -i 's/^required /# required /' "$PLUGSTACK"
  doctor
  ((rc == 1)) || fail "exit $rc without the plugstack line (want 1)"
  expect_item plugstack missing "no line for spank_pilot.so in $PLUGSTACK" \
    "(fix: add to $PLUGSTACK" "required spank_pilot.so"
  grep -q "this node cannot run a pilot" "$OUT" || fail "no 'cannot' summary"
  cp -p "$ROOTDIR/plugstack.conf.saved" "$PLUGSTACK"

  note "no key, then a key others can read"
  rm -f "$KEY"
  doctor
  ((rc == 1)) || fail "exit $rc without the key (want 1)"
  expect_item key missing "$KEY: does not exist" "(fix: run 'pilot keygen --policy $POLICY' as root)"
  cp -p "$ROOTDIR/verdict.key.saved" "$KEY"
  chmod 0644 "$KEY"
  doctor
  ((rc == 1)) || fail "exit $rc with the key mode 0644 (want 1)"
  expect_item key missing "mode 0644" "(fix: chown root $KEY && chmod 0600 $KEY)"
  cp -p "$ROOTDIR/verdict.key.saved" "$KEY"

  if ((yama >= 1)); then
    note "Yama at $yama on this kernel: a policy that requires it holds (nothing to take away)"
  else
    note "Yama required by the policy, absent from this kernel (or at 0)"
    sed -i 's/^require_ptrace_scope = .*/require_ptrace_scope = true/' "$POLICY"
    doctor
    ((rc == 1)) || fail "exit $rc with Yama required (want 1)"
    expect_item ptrace_scope missing "the policy requires it (require_ptrace_scope)" \
      "(fix: " "kernel.yama.ptrace_scope = 1"
    cp -p "$ROOTDIR/pilot.conf.saved" "$POLICY"
    allow_podman
  fi

  note "podman allowed but not runnable: the policy's podman_path names no program"
  echo "podman_path = \"$ROOTDIR/no-such/podman\"" >>"$POLICY"
  doctor
  ((rc == 1)) || fail "exit $rc without podman (want 1)"
  expect_item podman missing "$ROOTDIR/no-such/podman: not found" "(fix: install podman"
  cp -p "$ROOTDIR/pilot.conf.saved" "$POLICY"

  note "everything back: nothing missing again"
  doctor
  ((rc == 0)) || fail "pilot doctor exited $rc after the pieces were put back"
}

run_case "$@"
