#!/usr/bin/env bash
# The trust chain to the long run on the local cluster (spank_pilot(8),
# BINDING; pilot(1), grant): its slurmctld runs etc/job_submit.lua against
# the cluster's grant records (scripts/local-slurm).
#
#   binding.sh CASE   CASE: grant_run | grant_bounds | bound_requeue
#
# Environment as for e2e.sh (lib.sh); PILOT_TEST_USER2 (default pilotuser2)
# is the other user.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

RESV=""
binding_cleanup() {
  [[ -n $RESV ]] && scontrol delete reservation "$RESV" >/dev/null 2>&1 || true
  cleanup
}
trap binding_cleanup EXIT

# The node back to waiting (reserved for the grant: "resv"), never drained.
wait_node_free() {
  local i s
  for ((i = 0; i < 60; i++)); do
    s=$(node_state)
    [[ $s == idle || $s == resv ]] && return 0
    [[ $s == drain* || $s == down* ]] && fail "node is $s after the job"
    sleep 1
  done
  fail "node not free after 60 s (state $s)"
}

job_state() { scontrol show job "$1" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
run_field() { json "$STATE/runs/$1.json" "$2"; }

# A GO pilot of tiny.py (pinned; or COMMAND with PIN) in the user's folder
# DIR (a copy of tests/program), with ten days of data preparation so that
# its budget is a 30-day term on any machine, its run TARGET_STEPS (30)
# long with a checkpoint every INTERVAL (10) steps, granted for one node and
# ten days: sets JOB and RESV.
JOB="" DIR=""
granted_pilot() {  # granted_pilot NAME [COMMAND_TOML PIN_TOML TARGET_STEPS INTERVAL]
  # 0.3 CPU-s a step: root measures its work (busy), which a grant needs.
  local out command=${2:-'["python3", "tiny.py", "--step-cpu", "0.3"]'} pin=${3:-'pin = ["tiny.py"]'}
  grep -q '^JobSubmitPlugins=lua' "$SLURM_CONF" ||
    fail "the cluster runs no job_submit.lua (Slurm's job_submit_lua.so missing?)"
  DIR=$(user_copy "$SRC/tests/program" "$1")
  program_toml "$DIR/bind.toml" bind "$DIR" 1 "$command" "$pin"
  sed -i -e 's/^gpus_per_node = 2$/&\npreprocess_hours = 240/' \
    -e "s/^target_steps = 1000\$/target_steps = ${4:-30}\ncheckpoint_interval = ${5:-10}/" "$DIR/bind.toml"
  JOB=$(submit_wait --pilot="$DIR/bind.toml" --pilot-stage=single)
  wait_verdict "$JOB"
  [[ $(decision "$JOB") == GO ]] || fail "job $JOB: $(decision "$JOB"): $(verdict_text "$JOB")"
  [[ $(json "$STATE/verdicts/$JOB.json" 'd["budget"]["term"]') == 30-day ]] ||
    fail "job $JOB: term $(json "$STATE/verdicts/$JOB.json" 'd["budget"]')"
  out=$("$PILOT" grant --policy "$POLICY" "$JOB" --nodes 1 --duration 10-00:00:00 2>&1) ||
    fail "pilot grant $JOB: $out"
  RESV=pilot_$JOB
}

# A program pilot (tiny.py pinned) with ten days of data preparation, so
# that its budget is a 30-day term on any machine: GO, granted for 10 days.
# Then, against the grant: a 10-day job without the reservation, or in it
# without --pilot-run, or of another user, or with a script of its own, is
# rejected at submission; the unchanged run (`pilot run`) runs the pinned
# tiny.py for run.target_steps to COMPLETED, its checkpoint in its own
# folder; after the pinned script is edited the same run is refused before
# anything runs, with the file named, the node idle and `pilot verdict`
# listing both runs; another user's run of the pilot is refused by the
# node; a job that only inherits the variable from a bound run runs.
case_grant_run() {
  local t0=$SECONDS other dir job out ok bad stranger
  other=${PILOT_TEST_USER2:-pilotuser2}
  id "$other" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$other"
  granted_pilot program-bind
  dir=$DIR job=$JOB
  [[ $(json "$STATE/grants/$job.json" 'd["identity"]["sha256"]') == $(json "$STATE/verdicts/$job.json" 'd["identity"]["sha256"]') ]] ||
    fail "the grant does not record the verdict's run identity: $(cat "$STATE/grants/$job.json")"
  # The user checks what was granted with the site's public key; an edit
  # breaks the signature.
  out=$(as_user "$PILOT" grant --verify "$job" 2>&1) || fail "the user cannot verify the grant: $out"
  grep -q "signature valid (ed25519" <<<"$out" || fail "grant --verify: $out"
  cp "$STATE/grants/$job.json" "$TMP/grant.saved"
  sed -i 's/"nodes": 1,/"nodes": 4,/' "$STATE/grants/$job.json"
  out=$(as_user "$PILOT" grant --verify "$job" 2>&1) && fail "an edited grant verified: $out"
  grep -q "signature mismatch" <<<"$out" || fail "edited grant: $out"
  cp "$TMP/grant.saved" "$STATE/grants/$job.json"
  note "pilot $job GO, granted, the grant verified by the user ($((SECONDS - t0)) s)"

  # At submission (job_submit.lua): nothing runs.
  out=$(as_user sbatch --parsable --time=10-0 --wrap true 2>&1) && fail "a 10-day job without a grant was accepted: $out"
  grep -q "pilot verdict" <<<"$out" || fail "rejection without the way out: $out"
  out=$(as_user sbatch --parsable --time=10-0 --reservation="$RESV" --wrap true 2>&1) &&
    fail "a job that names no pilot run was accepted: $out"
  grep -q -- "--pilot-run=$job" <<<"$out" || fail "the rejection does not name --pilot-run=$job: $out"
  out=$(as_user sbatch --parsable --time=11-0 --reservation="$RESV" --pilot-run="$job" --wrap true 2>&1) &&
    fail "a job longer than the grant was accepted: $out"
  grep -q "exceeds the grant of job $job" <<<"$out" || fail "over the grant's duration: $out"
  out=$(cd "$TMP" && runuser -u "$other" -- env SLURM_CONF="$SLURM_CONF" sbatch --parsable --time=10-0 \
    --reservation="$RESV" --pilot-run="$job" --wrap true 2>&1) && fail "another user's job was accepted: $out"
  grep -q "not granted to $other" <<<"$out" || fail "another user: $out"

  # A bound job with a script of its own is refused at submission.
  out=$(as_user sbatch --parsable --time=10-0 --reservation="$RESV" --pilot-run="$job" \
    --wrap 'echo ARBITRARY' 2>&1) && fail "a bound job with a script of its own was accepted: $out"
  grep -qF "runs the pilot's program.command, not a script of its own: submit it with \`pilot run $job" <<<"$out" ||
    fail "a bound job's own script: $out"

  # The piloted run: its task runs the pilot's program.command (tiny.py,
  # pinned) through the supervisor, for run.target_steps, saving into its
  # own folder.
  ok=$(as_user "$PILOT" run "$job" -- --parsable -o "$TMP/long-%j.out" --time=10-0) || true
  ok=${ok%%$'\n'*}
  [[ $ok =~ ^[0-9]+$ ]] || fail "the piloted run was not submitted: $ok"
  wait_job "$ok"
  [[ $(job_state "$ok") == COMPLETED ]] || fail "job $ok: $(job_state "$ok"): $(cat "$TMP/long-$ok.out")"
  [[ $(run_field "$ok" 'd["decision"]') == admitted ]] || fail "run record: $(cat "$STATE/runs/$ok.json")"
  grep -qF "pilot: job $ok: the run of pilot $job (bind): 1 process of python3 tiny.py --step-cpu 0.3 in $dir, 30 steps, checkpoints in $TMP/pilot-run-$ok/checkpoints every 10 steps" \
    "$TMP/long-$ok.out" || fail "job $ok: not the pinned program: $(cat "$TMP/long-$ok.out")"
  grep -q "pilot: job $ok: the run ended: every process exited 0" "$TMP/long-$ok.out" ||
    fail "job $ok: $(cat "$TMP/long-$ok.out")"
  [[ -f $TMP/pilot-run-$ok/checkpoints/ckpt.pt ]] || fail "job $ok: tiny.py saved no checkpoint in its folder"
  ! grep -q "needs spank_pilot.so" "$TMP/long-$ok.out" || fail "job $ok: its batch script ran"
  note "long run $ok COMPLETED, admitted, tiny.py ran ($((SECONDS - t0)) s)"

  # The same run after the pinned script changed.
  echo "# edited after the pilot" >>"$dir/tiny.py"
  bad=$(as_user "$PILOT" run "$job" -- --parsable -o "$TMP/long-%j.out" --time=10-0) || true
  bad=${bad%%$'\n'*}
  [[ $bad =~ ^[0-9]+$ ]] || fail "the edited run was not submitted: $bad"
  wait_job "$bad"
  [[ $(job_state "$bad") == FAILED ]] || fail "job $bad: $(job_state "$bad")"
  ! grep -q "the run of pilot" "$TMP/long-$bad.out" || fail "job $bad: its program ran"
  [[ ! -e $TMP/pilot-run-$bad ]] || fail "job $bad: its program ran"
  grep -q "pilot: job $bad: refused: not the run piloted by job $job: pin tiny.py: sha256:" "$TMP/long-$bad.out" ||
    fail "job $bad: the refusal does not name the file: $(cat "$TMP/long-$bad.out")"
  wait_node_free
  out=$(as_user "$PILOT" verdict "$job") || fail "pilot verdict $job: $out"
  grep -q "job $ok admitted" <<<"$out" && grep -q "job $bad refused" <<<"$out" && grep -q "pin tiny.py: sha256:" <<<"$out" ||
    fail "pilot verdict lists no runs: $out"
  note "edited run $bad refused: $(grep -m1 refused "$TMP/long-$bad.out")"

  # Another user's job naming the pilot (short: no reservation needed).
  scontrol delete reservation "$RESV" >/dev/null
  RESV=""
  stranger=$(cd "$TMP" && runuser -u "$other" -- env SLURM_CONF="$SLURM_CONF" PILOT_POLICY="$POLICY" \
    "$PILOT" run "$job" -- --parsable -o "$TMP/stranger-%j.out" --time=10 2>&1) || true
  stranger=${stranger%%$'\n'*}
  [[ $stranger =~ ^[0-9]+$ ]] || fail "another user's job was not submitted: $stranger"
  wait_job "$stranger"
  [[ $(job_state "$stranger") == FAILED ]] || fail "job $stranger: $(job_state "$stranger")"
  [[ $(run_field "$stranger" '"; ".join(d["reasons"])') == "job $job was granted to $TEST_USER, not to $other" ]] ||
    fail "job $stranger: $(cat "$STATE/runs/$stranger.json")"
  wait_node_idle

  # A job submitted from inside a bound run (its sequel) inherits
  # SLURM_PILOT_RUN but names no pilot: it runs, unchecked and unrefused.
  local sequel
  sequel=$(as_user env SLURM_PILOT_RUN="$job" sbatch --parsable -o "$TMP/sequel-%j.out" \
    --wrap 'echo the sequel ran') || true
  sequel=${sequel%%$'\n'*}
  [[ $sequel =~ ^[0-9]+$ ]] || fail "the sequel was not submitted: $sequel"
  wait_job "$sequel"
  [[ $(job_state "$sequel") == COMPLETED ]] && grep -q "the sequel ran" "$TMP/sequel-$sequel.out" ||
    fail "job $sequel: $(job_state "$sequel"): $(cat "$TMP/sequel-$sequel.out" 2>&1)"
  [[ ! -e $STATE/runs/$sequel.json ]] || fail "job $sequel was checked as a bound run"
  wait_node_idle
  note "grant_run took $((SECONDS - t0)) s"
}

# One grant, one run, and no change after admission that breaks the grant
# (job_submit.lua's slurm_job_modify): against a granted pilot, a held run
# in its reservation is admitted; a second run and an array are rejected at
# submission with the reason; the user's `scontrol update` of the held run
# to two nodes, out of the reservation, past the grant's time or into
# another partition is refused with the error code's text, `pilot explain`
# tells why, and the job is unchanged; a shorter time limit is allowed; a
# short job is neither let into the reservation at submission nor moved
# into it later. Once the held run is cancelled another is admitted; the
# node is idle at the end.
case_grant_bounds() {
  local t0=$SECONDS job held out second unbound
  granted_pilot program-bounds
  job=$JOB
  note "pilot $job GO, granted ($((SECONDS - t0)) s)"
  sbatch_held() { as_user sbatch --parsable --hold -o /dev/null "$@" --wrap true 2>&1; }
  run_held() { as_user "$PILOT" run "$job" -- --parsable --hold -o /dev/null "$@" 2>&1; }

  held=$(run_held --time=10-0) || fail "the run was rejected: $held"
  [[ $held =~ ^[0-9]+$ ]] || fail "the run was not submitted: $held"
  out=$(run_held --time=10-0) && fail "a second run was admitted: $out"
  grep -q "one run at a time, and job $held is pending" <<<"$out" || fail "second run: $out"
  out=$(run_held --time=10-0 --array=0-1) &&
    fail "an array was admitted: $out"
  grep -q "is one job, not an array (--array=0-1)" <<<"$out" || fail "array: $out"
  out=$(sbatch_held --time=60 --reservation="$RESV") && fail "a short job was admitted into the reservation: $out"
  grep -q "runs only its pilot's run (it does not name its pilot: add --pilot-run=$job)" <<<"$out" ||
    fail "short job in the reservation: $out"

  # Changes to the admitted run, as its user: Slurm shows the code's text,
  # `pilot explain` the reason.
  refused_change() {  # refused_change WANT_SLURM_TEXT WANT_REASON scontrol-update-args...
    local text=$1 reason=$2 out
    shift 2
    out=$(as_user scontrol update job "$held" "$@" 2>&1) && fail "scontrol update $*: accepted: $out"
    grep -q "$text" <<<"$out" || fail "scontrol update $*: $out"
    out=$(as_user "$PILOT" explain "$held" 2>&1) || fail "pilot explain $held after $*: $out"
    grep -qF "why     $reason" <<<"$out" || fail "pilot explain $held after $*: $out"
  }
  refused_change "Node count specification invalid" \
    "a run bound to pilot $job may use at most 1 node(s), the grant's (asked for 2)" NumNodes=2
  refused_change "Access/permission denied" \
    "a run bound to pilot $job stays in reservation $RESV (asked for none)" Reservation=
  refused_change "Requested time limit is invalid" \
    "its time limit exceeds the grant of job $job (10.0 days)" TimeLimit=20-0
  refused_change "Access/permission denied" \
    "a run bound to pilot $job stays in partition" Partition=elsewhere
  out=$(as_user "$PILOT" explain "$held") || fail "pilot explain $held: $out"
  grep -q "grant   $RESV for $TEST_USER: at most 1 node(s) and 14400 minutes; one job, never an array" <<<"$out" || fail "explain: $out"
  out=$(scontrol show job "$held")
  grep -q "Reservation=$RESV" <<<"$out" && grep -q "NumNodes=1 " <<<"$out" &&
    grep -q "TimeLimit=10-00:00:00" <<<"$out" || fail "job $held changed: $out"
  out=$(as_user scontrol update job "$held" TimeLimit=9-0 2>&1) || fail "a shorter time limit was refused: $out"

  # A short job outside the grant may not be moved into it.
  unbound=$(sbatch_held --time=60) || fail "a short job was rejected: $unbound"
  out=$(as_user scontrol update job "$unbound" Reservation="$RESV" 2>&1) && fail "moved into $RESV: $out"
  out=$(as_user "$PILOT" explain "$unbound" 2>&1) || fail "pilot explain $unbound: $out"
  grep -q "add --pilot-run=$job" <<<"$out" || fail "pilot explain $unbound: $out"
  out=$(as_user "$PILOT" explain 999999 2>&1) && fail "explain of a job without a record: $out"
  grep -q "^pilot: explain: job 999999: no refused change recorded" <<<"$out" || fail "explain 999999: $out"
  note "run $held admitted, changes refused ($((SECONDS - t0)) s)"

  # Once the run has ended the grant admits another.
  scancel "$held" "$unbound"
  wait_job "$held"
  second=$(run_held --time=10-0) ||
    fail "a run after the first ended was rejected: $second"
  scancel "$second"
  wait_job "$second"
  scontrol delete reservation "$RESV" >/dev/null
  RESV=""
  wait_node_idle
  note "grant_bounds took $((SECONDS - t0)) s"
}

# The restart the pilot proved: a bound run of tiny.py (a checkpoint every 5
# of its 25 steps, --save-every, each marked complete by slurm_pilot.saved)
# is requeued by its user once it has saved and gone two steps past the
# save; it starts again (after the cluster's cred_expire), resumes after the
# newest complete checkpoint, and the losses of the steps both attempts ran
# are equal; it ends COMPLETED at step 25, the node idle.
case_bound_requeue() {
  local t0=$SECONDS job run out i saved=0 last=0 resumed first second state
  granted_pilot program-requeue '["python3", "tiny.py", "--save-every", "5", "--step-cpu", "0.3"]' \
    'pin = ["tiny.py"]' 25 5
  job=$JOB
  note "pilot $job GO, granted ($((SECONDS - t0)) s)"
  run=$(as_user "$PILOT" run "$job" -- --parsable --requeue --open-mode=append -o "$TMP/run-%j.out" --time=10-0) ||
    fail "the run was not submitted: $run"
  run=${run%%$'\n'*}
  local record=$TMP/pilot-run-$run/checkpoints/pilot-resume.json
  for ((i = 0; i < 600; i++)); do  # a save marked complete, then two steps past it
    [[ -f $record ]] && saved=$(json "$record" 'd["step"]')
    last=$(sed -n 's/^step \([0-9]*\) loss .*/\1/p' "$TMP/run-$run.out" 2>/dev/null | tail -n1) || true
    ((saved > 0 && ${last:-0} >= saved + 2)) && break
    state=$(job_state "$run")
    [[ $state == PENDING || $state == CONFIGURING || $state == RUNNING ]] ||
      fail "job $run ended before its requeue ($state): $(cat "$TMP/run-$run.out")"
    sleep 0.1
  done
  ((saved > 0)) || fail "job $run: no checkpoint marked complete: $(cat "$TMP/run-$run.out")"
  as_user scontrol requeue "$run" || fail "scontrol requeue $run"
  note "run $run requeued at step $last, its newest complete checkpoint step $saved ($((SECONDS - t0)) s)"
  # Slurm holds a requeued job for cred_expire (20 s here) and the next
  # scheduling pass; once it is pending again, and a second past the old
  # credential, the administrator lets it start now: only the wait is cut.
  for ((i = 0; i < 300; i++)); do
    [[ $(job_state "$run") == PENDING ]] && ! scontrol show job "$run" | grep -q ' JobState=PENDING.*COMPLETING' && break
    sleep 0.1
  done
  sleep 1
  scontrol update job "$run" StartTime=now || fail "scontrol update job $run StartTime=now"
  wait_job "$run" 300
  [[ $(job_state "$run") == COMPLETED ]] || fail "job $run: $(job_state "$run"): $(cat "$TMP/run-$run.out")"
  out=$(cat "$TMP/run-$run.out")
  resumed=$(sed -n 's/.*, resuming after step \([0-9]*\)$/\1/p' <<<"$out")
  [[ -n $resumed ]] && ((resumed >= saved && resumed % 5 == 0)) || fail "job $run did not resume: $out"
  # Each attempt's "step N loss X" lines, split at the resuming attempt's start.
  first=$(sed -n '/, resuming after step/q;s/^step //p' <<<"$out")
  second=$(sed -n '/, resuming after step/,$s/^step //p' <<<"$out")
  [[ $(head -n1 <<<"$second") == "$((resumed + 1)) loss "* ]] || fail "job $run resumed at: $(head -n1 <<<"$second")"
  [[ $(tail -n1 <<<"$second") == "25 loss "* ]] || fail "job $run ended at: $(tail -n1 <<<"$second")"
  local both
  both=$(join <(sort -k1,1 <<<"$first") <(sort -k1,1 <<<"$second") | awk '$2 != "loss" || $3 != $5 {print "differs: " $0}; END {print NR " steps"}')
  [[ $both == *" steps" && $both != *differs* && ${both%% *} -ge 2 ]] ||
    fail "job $run: the steps both attempts ran: $both"
  [[ $(run_field "$run" 'd["decision"]') == admitted ]] || fail "run record: $(cat "$STATE/runs/$run.json")"
  scontrol delete reservation "$RESV" >/dev/null
  RESV=""
  wait_node_idle
  note "bound_requeue: resumed after step $resumed, ${both%% *} steps equal in both attempts; took $((SECONDS - t0)) s"
}

run_case "$@"
