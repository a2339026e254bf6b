#!/usr/bin/env bash
# The fault matrix on the local cluster of scripts/local-slurm (CTest label
# `slurm`): faults of the cluster itself during a pilot, each ending with a
# verdict that says what happened and a node that is not drained.
#
#   faults.sh CASE   CASE: ctld_restart slurmd_restart_epilog epilog_budget
#                          epilog_sigterm concurrent work_cleanup
#                          user_fills_work state_full space_grabber
#                          pilot_fills_state
#
#   ctld_restart           slurmctld restarted while the pilot runs
#   slurmd_restart_epilog  slurmd restarted while the epilog verifies
#   epilog_budget          a verify that hangs, cut by epilog_timeout_seconds
#   epilog_sigterm         SIGTERM to the epilog during verify (what slurmd
#                          sends at PrologEpilogTimeout)
#   concurrent             20 pilot jobs submitted at once
#   work_cleanup           the job's work folder removed once its verdict is
#                          stored (keep_work = false), kept with keep_work
#   user_fills_work        the user fills work_root's file system (a tmpfs)
#   state_full             the state directory's file system (a tmpfs) full
#                          when the verdict is written, and after
#   pilot_fills_state      a program pilot whose work folder (on the state
#                          file system) fills it: ended by its supervisor
#                          with the reason, the next pilot GO
#   space_grabber          a first user's job takes every block the state
#                          file system frees while a second user's pilot
#                          ends: its verdict is stored all the same, and a
#                          next pilot is refused, never runs its command
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
  # The restarted slurmd never reports the first epilog's end: slurmctld
  # resends TERMINATE_JOB on its next periodic pass (every 60 s from its
  # start) and the node completes once that second epilog (its verify
  # slowed 15 s again) is done: up to about 80 s after the verdict.
  wait_node_idle 150
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

# A tmpfs of SIZE at DIR (root's, 0755), unmounted when the case ends; exit
# 77 (CTest: skipped) where mounts are refused.
MOUNTS=()
CANCEL=()  # jobs a case leaves running, cancelled when the script ends
trap 'for j in "${CANCEL[@]}"; do scancel "$j" 2>/dev/null || true; done
      for m in "${MOUNTS[@]}"; do umount -l "$m" 2>/dev/null || true; done; restore_policy; cleanup' EXIT
small_fs() {  # small_fs DIR SIZE
  mkdir -p "$1"
  if ! mount -t tmpfs -o "size=$2,mode=0755" tmpfs "$1" 2>/dev/null; then
    echo "SKIP: cannot mount a tmpfs here (root in a namespace that allows mounts needed)"
    exit 77
  fi
  MOUNTS+=("$1")
}
fill_fs() {  # fill_fs FILE: as root, until the file system is full
  dd if=/dev/zero of="$1" bs=64k status=none 2>/dev/null || true
  [[ $(df -B1 --output=avail "$(dirname "$1")" | tail -1) -lt 65536 ]] || fail "$1: the file system is not full"
}

case_work_cleanup() {
  local job kept
  policy_set work_root "\"$CLUSTER/work\""
  policy_set keep_work false
  job=$(submit_wait --pilot="$TINY" --pilot-stage=single)
  wait_verdict "$job"
  [[ $(decision "$job") == GO ]] || fail "job $job: $(verdict_text "$job")"
  sleep 0.5
  [[ ! -e $CLUSTER/work/$job ]] || fail "job $job's work folder outlived its verdict: $(ls -la "$CLUSTER/work/$job")"
  policy_set keep_work true
  kept=$(submit_wait --pilot="$TINY" --pilot-stage=single)
  wait_verdict "$kept"
  compgen -G "$CLUSTER/work/$kept/*" >/dev/null || fail "keep_work = true, yet job $kept's work folder is gone or empty"
  wait_node_idle
  note "work_cleanup: job $job's work folder removed after its verdict, job $kept's kept"
}

# The issue's drain: a user fills the file system of the work folders from
# an old job's folder. With work_root apart from state_dir, the next pilot
# still gets its lock and a verdict that names the space.
case_user_fills_work() {
  local job
  small_fs "$CLUSTER/workfs" 64m
  policy_set work_root "\"$CLUSTER/workfs\""
  policy_set keep_work true
  install -d -m 0700 -o "$TEST_USER" "$CLUSTER/workfs/old-job"
  as_user dd if=/dev/zero of="$CLUSTER/workfs/old-job/fill" bs=64k status=none 2>/dev/null || true
  [[ $(df -B1 --output=avail "$CLUSTER/workfs" | tail -1) -lt 65536 ]] || fail "the user could not fill $CLUSTER/workfs"
  job=$(submit_wait --pilot="$TINY" --pilot-stage=single)
  wait_verdict "$job"
  [[ -s $STATE/jobs/$job/lock.json ]] || fail "no lock for job $job"
  [[ $(decision "$job") == NO-GO ]] || fail "a pilot on a full work file system gave $(decision "$job")"
  verdict_text "$job" | grep -qE "free on|[Nn]o space" || fail "the verdict does not name the space: $(verdict_text "$job")"
  wait_node_idle
  note "user_fills_work: job $job NO-GO ($(json "$STATE/verdicts/$job.json" "[c['detail'] for c in d['checks'] if c['status']=='fail'][0]")), node $(node_state)"
}

# The state directory's file system full when the verdict is written: the
# verdict goes into the space the prolog set aside for it (the reserve is
# not even needed); the next pilot, below the floor, is refused with a
# NO-GO that says why (its lock from the reserve), its command not run, and
# the node stays up; with room again pilots are admitted and the reserve is
# made again.
case_state_full() {
  local job second third log=$CLUSTER/log/pilot-epilog.log
  policy_set work_root "\"$CLUSTER/work\""
  small_fs "$STATE" 24m
  slow_verify 6
  job=$(submit --pilot="$TINY" --pilot-stage=single)
  wait_for_file "$MARK" 120
  fill_fs "$STATE/filler"
  wait_verdict "$job" 60
  [[ $(decision "$job") == GO ]] || fail "job $job on a full state file system: $(verdict_text "$job")"
  [[ ! -e $STATE/jobs/$job/verdict.space ]] || fail "job $job's verdict space is still there"
  [[ $(stat -c %s "$STATE/reserve" 2>/dev/null) -gt 0 ]] ||
    fail "the reserve was spent on job $job's verdict, which had space of its own: $(grep "job $job:" "$log")"
  wait_node_idle

  # Still full: the next pilot is below the floor (state_floor_mb), refused
  # with a reason; its lock comes from the reserve.
  fill_fs "$STATE/filler2"
  rm -f "$DELAY"
  second=$(submit_wait --pilot="$TINY" --pilot-stage=single)
  wait_verdict "$second" 60
  [[ $(decision "$second") == NO-GO ]] || fail "job $second below the floor: $(decision "$second")"
  verdict_says "$second" "state_space_low"
  grep -q "pilot: job $second: pilot refused: " "$TMP/slurm-$second.out" ||
    fail "job $second's output does not say it was refused: $(cat "$TMP/slurm-$second.out")"
  grep "job $second:" "$CLUSTER/log/pilot-prolog.log" | grep -q "refusing the pilot" ||
    fail "no prolog line for job $second: $(grep "job $second:" "$CLUSTER/log/pilot-prolog.log")"
  wait_node_idle

  # Room again: the reserve comes back, and verdicts are stored.
  rm -f "$STATE/filler" "$STATE/filler2"
  third=$(submit_wait --pilot="$TINY" --pilot-stage=single)
  wait_verdict "$third"
  [[ $(decision "$third") == GO ]] || fail "job $third after the space came back: $(verdict_text "$third")"
  [[ $(stat -c %s "$STATE/reserve" 2>/dev/null) -gt 0 ]] || fail "the reserve was not made again"
  wait_node_idle
  note "state_full: job $job GO from its own space; job $second refused (state_space_low); job $third GO"
}

# A pilot whose program fills the state file system from its work folder
# (there by default): its supervisor ends it within seconds of the free
# space falling below state_floor_mb, the verdict (stored) says why, the
# epilog removes the folder, and the next pilot runs and gets GO.
case_pilot_fills_state() {
  local dir cfg job next
  policy_set work_root '""'
  policy_set keep_work false
  policy_set state_floor_mb 16
  small_fs "$STATE" 96m
  dir=$(user_copy "$SRC/tests/program" fills)
  cfg=$dir/fills.toml
  program_toml "$cfg" fills "$dir" 2 '["python3", "tiny.py", "--fault", "fill_work"]' "step_timeout = 60"
  job=$(submit_wait --pilot="$cfg" --pilot-stage=single)
  wait_verdict "$job" 120
  [[ $(decision "$job") == NO-GO ]] || fail "job $job filled the state file system and got $(decision "$job")"
  local why
  why=$(check_detail "$job" completed)
  grep -q "which it took below the site's floor" <<<"$why" || fail "job $job: completed: $why"
  grep -q "work folder $STATE/jobs/$job/work holds" <<<"$why" || fail "job $job: the folder is not named: $why"
  wait_node_idle
  [[ $(df -B1 --output=avail "$STATE" | tail -1) -gt $((32 << 20)) ]] || fail "the space is not back: $(df -h "$STATE")"
  next=$(submit_wait --pilot="$TINY" --pilot-stage=single)
  wait_verdict "$next" 120
  [[ $(decision "$next") == GO ]] || fail "job $next after the filler: $(verdict_text "$next")"
  note "pilot_fills_state: job $job NO-GO (${why:0:160}...); job $next GO"
}

# The issue's attack, with the work folders on the state file system (the
# default): a first user's job takes every block the file system frees, so
# a shared reserve released for a second user's verdict goes to it first
# (made certain here: no reserve at all). The second user's verdict is
# stored all the same, from the space its prolog set aside; a next pilot is
# refused (below the floor, or without a lock) and never runs its command.
case_space_grabber() {
  local other=${PILOT_TEST_USER2:-pilotuser2}
  id "$other" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$other"
  as_other() {
    (cd "$TMP/other" && runuser -u "$other" -- env SLURM_CONF="$SLURM_CONF" PATH=/usr/local/bin:/usr/bin:/bin "$@")
  }
  install -d -m 0755 -o "$other" "$TMP/other"
  local cfg=$TMP/other/tiny.toml
  install -m 0644 -o "$other" "$TINY_SRC" "$cfg"
  small_fs "$STATE" 32m
  policy_set state_reserve_mb 0
  slow_verify 8
  # The first user's folder on the state file system (an old job's kept
  # work folder), and a job of theirs that, once told, takes every block
  # the file system frees for as long as it runs.
  install -d -m 0700 -o "$TEST_USER" "$STATE/grab"
  # shellcheck disable=SC2016  # $i and $((...)) are the script's own
  printf '%s\n' '#!/bin/sh' \
    "until [ -e $TMP/grab-now ]; do sleep 0.2; done" \
    'i=0' \
    'while :; do' \
    '  i=$((i + 1))' \
    "  fallocate -l 1M $STATE/grab/b\$i 2>/dev/null || fallocate -l 4k $STATE/grab/s\$i 2>/dev/null ||" \
    "    { rm -f $STATE/grab/b\$i $STATE/grab/s\$i; sleep 0.01; }" \
    'done' >"$TMP/grab.sh"
  chmod 0755 "$TMP/grab.sh"
  local grabber out i second next
  out=$(as_user sbatch --parsable -o "$TMP/grab-%j.out" -t 10 --wrap "$TMP/grab.sh") || fail "sbatch grabber: $out"
  grabber=${out%%;*}
  CANCEL+=("$grabber")
  for ((i = 0; i < 150; i++)); do
    [[ $(squeue -h -j "$grabber" -o %T) == RUNNING ]] && break
    sleep 0.2
  done
  [[ $(squeue -h -j "$grabber" -o %T) == RUNNING ]] || fail "the grabber job $grabber does not run"

  out=$(as_other sbatch --parsable -o "$TMP/other/slurm-%j.out" --pilot="$cfg" --pilot-stage=single \
          --wrap "touch $TMP/other/command-ran") || fail "sbatch --pilot as $other: $out"
  second=${out%%;*}
  # verify runs as $other, who cannot write into $TMP: the wrapper's pid
  # file is theirs, and verify has started once it holds the pid.
  install -m 0644 -o "$other" /dev/null "$MARK"
  for ((i = 0; i < 900; i++)); do
    [[ -s $MARK ]] && break
    sleep 0.2
  done
  [[ -s $MARK ]] || fail "job $second's verify did not start within 180 s"
  touch "$TMP/grab-now"
  for ((i = 0; i < 100; i++)); do
    (( $(df -B1 --output=avail "$STATE" | tail -1) < 65536 )) && break
    sleep 0.1
  done
  (( $(df -B1 --output=avail "$STATE" | tail -1) < 65536 )) || fail "the grabber did not fill $STATE"
  wait_verdict "$second" 120
  [[ $(decision "$second") == GO ]] || fail "$other's pilot $second beside the grabber: $(verdict_text "$second")"
  [[ ! -e $TMP/other/command-ran ]] || fail "$other's batch command ran in place of the pilot"

  # Still grabbing: the next pilot gets a clear refusal, never its command.
  rm -f "$DELAY"
  out=$(as_other sbatch --parsable -o "$TMP/other/slurm-%j.out" --pilot="$cfg" --pilot-stage=single \
          --wrap "touch $TMP/other/next-command-ran") || true
  next=${out%%$'\n'*}
  next=${next%%;*}
  [[ $next =~ ^[0-9]+$ ]] || fail "the next pilot was not submitted: $out"
  wait_job "$next"
  [[ ! -e $TMP/other/next-command-ran ]] || fail "job $next ran the batch command in place of the pilot"
  grep -qE "pilot: job $next: (pilot refused|no lock for this pilot job)" "$TMP/other/slurm-$next.out" ||
    fail "job $next's output does not say why: $(cat "$TMP/other/slurm-$next.out")"
  if [[ -e $STATE/verdicts/$next.json ]]; then
    [[ $(decision "$next") == NO-GO ]] || fail "job $next below the floor: $(decision "$next")"
  fi
  scancel "$grabber"
  wait_node_idle
  note "space_grabber: $other's verdict $second stored (GO) while job $grabber grabbed; job $next:" \
       "$(grep -hE "pilot: job $next:" "$TMP/other/slurm-$next.out" | cut -c1-200)"
}

run_case "$@"
