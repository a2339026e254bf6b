#!/usr/bin/env bash
# The fault matrix on the local cluster of scripts/local-slurm (CTest label
# `slurm`): faults of the cluster itself during a pilot, each ending with a
# verdict that says what happened and a node that is not drained.
#
#   faults.sh CASE   CASE: ctld_restart slurmd_restart_epilog epilog_budget
#                          epilog_sigterm concurrent
#
#   ctld_restart           slurmctld restarted while the pilot runs
#   slurmd_restart_epilog  slurmd restarted while the epilog verifies
#   epilog_budget          a verify that hangs, cut by epilog_timeout_seconds
#   epilog_sigterm         SIGTERM to the epilog during verify (what slurmd
#                          sends at PrologEpilogTimeout)
#   concurrent             20 pilot jobs submitted at once
#
# The epilog cases run verify through a wrapper (in the cluster's bin/, named
# by the policy's runner_path for the test) that waits the seconds in a file
# before the real runner, and records its pid; the policy is restored after.
# Environment as for e2e.sh.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

LOCAL_SLURM=$SRC/scripts/local-slurm
WRAPPER=$CLUSTER/bin/pilot-runner-slow-verify
DELAY=$CLUSTER/etc/verify-delay
MARK=$TMP/verify.pid      # the wrapper's pid = its process group (RunCommand)
cp "$POLICY" "$TMP/pilot.conf.saved"
restore_policy() {
  cp "$TMP/pilot.conf.saved" "$POLICY"
  rm -f "$WRAPPER" "$DELAY"
}
trap 'restore_policy; cleanup' EXIT

policy_set() {  # policy_set KEY VALUE: sets a top-level key of the cluster's policy
  if grep -q "^$1 = " "$POLICY"; then
    sed -i "s|^$1 = .*|$1 = $2|" "$POLICY"
  else
    sed -i "0,/^\[/s|^\[|$1 = $2\n[|" "$POLICY"
  fi
}

slow_verify() {  # slow_verify SECONDS: verify waits that long first
  local real
  real=$(sed -n 's/^runner_path = "\(.*\)"/\1/p' "$TMP/pilot.conf.saved")
  cat >"$WRAPPER" <<EOF
#!/bin/sh
if [ "\$1" = verify ] && [ -r $DELAY ]; then
  echo \$\$ > $MARK
  sleep "\$(cat $DELAY)"
fi
exec $real "\$@"
EOF
  chmod 0755 "$WRAPPER"
  echo "$1" >"$DELAY"
  chmod 0644 "$DELAY"
  rm -f "$MARK"
  policy_set runner_path "\"$WRAPPER\""
}

# A process of group PGID still runs (not a zombie), within 5 s.
group_alive() {
  local i
  for ((i = 0; i < 25; i++)); do
    ps -o stat= -g "$1" 2>/dev/null | grep -qv '^Z' || return 1
    sleep 0.2
  done
  ps -o pid,ppid,stat,user,args -g "$1" >&2
  return 0
}

# The verdict of JOB names REASON (a fixed string) among its checks.
verdict_says() { verdict_text "$1" | grep -qF -- "$2" || fail "job $1: no '$2' in: $(verdict_text "$1")"; }

submit() {  # submit SBATCH_ARGS...: prints the job id, does not wait
  local out
  out=$(as_user sbatch --parsable -o "$TMP/slurm-%j.out" "$@" --wrap true) || fail "sbatch: $out"
  echo "${out%%;*}"
}

# ---- cases ------------------------------------------------------------------

case_ctld_restart() {
  local job t0
  job=$(submit --pilot="$TINY" --pilot-stage=all)
  wait_for_file "$STATE/jobs/$job/runner.started" 60
  sleep 2
  [[ ! -e $STATE/jobs/$job/results.json ]] || fail "job $job ended before the restart (make the pilot longer)"
  t0=$SECONDS
  "$LOCAL_SLURM" restart slurmctld
  note "slurmctld restarted in $((SECONDS - t0)) s while job $job ran"
  [[ ! -e $STATE/jobs/$job/results.json ]] || fail "job $job ended during the restart (make the pilot longer)"
  wait_verdict "$job" 240
  [[ $(decision "$job") == GO ]] || fail "job $job after a slurmctld restart: $(verdict_text "$job")"
  wait_node_idle
  note "ctld_restart: job $job GO, node $(node_state)"
}

case_slurmd_restart_epilog() {
  local job pid
  slow_verify 15
  job=$(submit --pilot="$TINY" --pilot-stage=single)
  wait_for_file "$MARK" 120
  pid=$(cat "$MARK")
  "$LOCAL_SLURM" restart slurmd
  note "slurmd restarted while verify (pid $pid) waited"
  wait_verdict "$job" 120
  [[ $(decision "$job") == GO ]] || fail "job $job: $(verdict_text "$job")"
  ! group_alive "$pid" || fail "verify's group ($pid) still runs"
  wait_node_idle
  note "slurmd_restart_epilog: job $job GO, node $(node_state)"
}

case_epilog_budget() {
  local job pid t0
  slow_verify 1000   # a verify that hangs (a stuck file system)
  policy_set epilog_timeout_seconds 20
  job=$(submit --pilot="$TINY" --pilot-stage=single)
  wait_for_file "$MARK" 120
  pid=$(cat "$MARK")
  t0=$SECONDS
  wait_verdict "$job" 60
  (( SECONDS - t0 <= 20 )) || fail "the verdict came $((SECONDS - t0)) s after verify started"
  [[ $(decision "$job") == NO-GO ]] || fail "a hung verify gave $(decision "$job")"
  verdict_says "$job" "timed out after 5 s (what was left of the epilog's epilog_timeout_seconds = 20)"
  sleep 1
  ! group_alive "$pid" || fail "verify's group ($pid) outlived its time limit"
  wait_node_idle
  note "epilog_budget: job $job NO-GO after $((SECONDS - t0)) s, node $(node_state)"
}

case_epilog_sigterm() {
  local job pid epid
  slow_verify 1000
  job=$(submit --pilot="$TINY" --pilot-stage=single)
  wait_for_file "$MARK" 120
  pid=$(cat "$MARK")
  epid=$(ps -o ppid= -p "$pid" | tr -d ' ')
  [[ $(ps -o comm= -p "$epid") == pilot-epilog ]] || fail "verify's parent $epid is $(ps -o comm= -p "$epid")"
  kill -TERM "$epid"
  wait_verdict "$job" 30
  [[ $(decision "$job") == NO-GO ]] || fail "an interrupted verify gave $(decision "$job")"
  verdict_says "$job" "stopped: the caller received SIGTERM"
  ! group_alive "$pid" || fail "verify's group ($pid) outlived the epilog's SIGTERM"
  wait_node_idle
  note "epilog_sigterm: job $job NO-GO, node $(node_state)"
}

case_concurrent() {
  local n=20 i cfg t0 job
  local -a jobs=() cfgs=()
  t0=$SECONDS
  # Each job its own seed and step count, so a mixed-up verdict shows.
  for ((i = 0; i < n; i++)); do
    cfg=$(user_config "c$i.toml" "s/^steps = 12/steps = $((10 + i % 5))/" 's/^at_step = 6/at_step = 5/')
    cfgs+=("$cfg")
  done
  for ((i = 0; i < n; i++)); do
    jobs+=("$(submit --pilot="${cfgs[$i]}" --pilot-stage=single)")
  done
  note "$n jobs submitted in $((SECONDS - t0)) s: ${jobs[*]}"
  for ((i = 0; i < n; i++)); do
    job=${jobs[$i]}
    wait_verdict "$job" 600
    [[ $(decision "$job") == GO ]] || fail "job $job of $n: $(verdict_text "$job")"
    [[ $(json "$STATE/verdicts/$job.json" 'd["job"]["id"]') == "$job" ]] || fail "verdict $job names another job"
    [[ $(json "$STATE/verdicts/$job.json" 'd["instance"]') == $(json "$STATE/jobs/$job/lock.json" 'd["instance"]') ]] ||
      fail "verdict $job is of another instance than its lock"
    [[ $(json "$STATE/jobs/$job/results.json" 'd["stages"]["single"]["steps"]') == $((10 + i % 5)) ]] ||
      fail "job $job's results are of another config"
  done
  wait_node_idle
  note "concurrent: $n verdicts, all GO and each its own job's, in $((SECONDS - t0)) s"
}

run_case "$@"
