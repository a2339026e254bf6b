#!/usr/bin/env bash
# The trust chain to the long run on the local cluster (spank_pilot(8),
# BINDING; pilot(1), grant): its slurmctld runs etc/job_submit.lua against
# the cluster's grant records (scripts/local-slurm).
#
#   binding.sh CASE   CASE: grant_run
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

# A program pilot (tiny.py pinned) with ten days of data preparation, so
# that its budget is a 30-day term on any machine: GO, granted for 10 days.
# Then, against the grant: a 10-day job without the reservation, or in it
# without --pilot-run, or of another user, is rejected at submission; the
# unchanged run in the reservation runs to COMPLETED; after the pinned
# script is edited the same job's task is refused before it runs, with the
# file named, the node idle and `pilot verdict` listing both runs; another
# user's job that names the pilot is refused by the node; a job that only
# inherits the variable from a bound run runs.
case_grant_run() {
  local t0=$SECONDS other dir job out ok bad stranger
  grep -q '^JobSubmitPlugins=lua' "$SLURM_CONF" ||
    fail "the cluster runs no job_submit.lua (Slurm's job_submit_lua.so missing?)"
  other=${PILOT_TEST_USER2:-pilotuser2}
  id "$other" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$other"
  dir=$(user_copy "$SRC/tests/program" program-bind)
  program_toml "$dir/bind.toml" bind "$dir" 1 '["python3", "tiny.py"]' 'pin = ["tiny.py"]'
  sed -i 's/^gpus_per_node = 2$/&\npreprocess_hours = 240/' "$dir/bind.toml"
  job=$(submit_wait --pilot="$dir/bind.toml" --pilot-stage=single)
  wait_verdict "$job"
  [[ $(decision "$job") == GO ]] || fail "job $job: $(decision "$job"): $(verdict_text "$job")"
  [[ $(json "$STATE/verdicts/$job.json" 'd["budget"]["term"]') == 30-day ]] ||
    fail "job $job: term $(json "$STATE/verdicts/$job.json" 'd["budget"]')"
  out=$("$PILOT" grant --policy "$POLICY" "$job" --nodes 1 --duration 10-00:00:00 2>&1) ||
    fail "pilot grant $job: $out"
  RESV=pilot_$job
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

  # The piloted run.
  ok=$(as_user sbatch --parsable -o "$TMP/long-%j.out" --time=10-0 --reservation="$RESV" \
    --pilot-run="$job" --wrap 'echo the long run ran') || true
  ok=${ok%%$'\n'*}
  [[ $ok =~ ^[0-9]+$ ]] || fail "the piloted run was not submitted: $ok"
  wait_job "$ok"
  [[ $(job_state "$ok") == COMPLETED ]] || fail "job $ok: $(job_state "$ok"): $(cat "$TMP/long-$ok.out")"
  grep -q "the long run ran" "$TMP/long-$ok.out" || fail "job $ok: its command did not run"
  [[ $(run_field "$ok" 'd["decision"]') == admitted ]] || fail "run record: $(cat "$STATE/runs/$ok.json")"
  note "long run $ok COMPLETED, admitted ($((SECONDS - t0)) s)"

  # The same run after the pinned script changed.
  echo "# edited after the pilot" >>"$dir/tiny.py"
  bad=$(as_user sbatch --parsable -o "$TMP/long-%j.out" --time=10-0 --reservation="$RESV" \
    --pilot-run="$job" --wrap 'echo the long run ran') || true
  bad=${bad%%$'\n'*}
  [[ $bad =~ ^[0-9]+$ ]] || fail "the edited run was not submitted: $bad"
  wait_job "$bad"
  [[ $(job_state "$bad") == FAILED ]] || fail "job $bad: $(job_state "$bad")"
  ! grep -q "the long run ran" "$TMP/long-$bad.out" || fail "job $bad: its command ran"
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
  stranger=$(cd "$TMP" && runuser -u "$other" -- env SLURM_CONF="$SLURM_CONF" sbatch --parsable \
    -o "$TMP/stranger-%j.out" --time=10 --pilot-run="$job" --wrap 'echo the stranger ran' 2>&1) || true
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

run_case "$@"
