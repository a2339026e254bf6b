#!/usr/bin/env bash
# Program mode on the local cluster: the user's own PyTorch program is the
# pilot (pilot-program(7)); the verdict is about what it did.
#
#   program.sh CASE   CASE: example_go broken loss_pattern real_programs pins
#
# Environment as for e2e.sh (lib.sh).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

reason_of() {  # reason_of JOB: every failing check's detail, one per line
  json "$STATE/verdicts/$1.json" "'\n'.join(c['name'] + ': ' + c['detail'] for c in d['checks'] if c['status']=='fail')"
}

# examples/train_gpt.py with examples/gpt-program.toml: GO, both stages,
# the restore the program's losses compared by the supervisor, the
# checkpoint opened by the resumed process (the supervisor's fanotify) and
# read by the epilog.
case_example_go() {
  local dir job out
  dir=$(user_copy "$SRC/examples" examples)
  sed -i "s|^workdir = .*|workdir = \"$dir\"|" "$dir/gpt-program.toml"
  job=$(submit_wait --pilot="$dir/gpt-program.toml")
  wait_verdict "$job"
  [[ $(decision "$job") == GO ]] || fail "job $job: $(decision "$job"): $(reason_of "$job") $(verdict_text "$job")"
  local res=$STATE/jobs/$job/results.json
  [[ $(json "$res" 'd["workload"]') == program ]] || fail "results.json is not a program's"
  [[ $(json "$res" 'd["program"]["command"][1]') == train_gpt.py ]] || fail "command not recorded"
  [[ $(json "$res" 'd["stages"]["node"]["world_size"]') == 2 ]] || fail "no node stage of 2 ranks"
  [[ $(json "$res" 'd["stages"]["single"]["restore"]["mode"]') == bitwise ]] || fail "restore not bitwise on CPU"
  [[ $(check_named "$job" restore) == pass ]] || fail "restore check: $(check_named "$job" restore)"
  [[ $(json "$STATE/verdicts/$job.json" "[c['verified_by'] for c in d['checks'] if c['name']=='restore'][0]") == workload_compared ]] ||
    fail "restore not labelled as the program's figures compared by the supervisor"
  [[ $(check_named "$job" checkpoint_read) == pass ]] || fail "checkpoint_read: $(reason_of "$job")"
  [[ $(json "$res" 'd["program"]["checkpoint_read"]["opened_files"]') -ge 1 ]] || fail "no checkpoint file seen opened"
  [[ $(json "$STATE/verdicts/$job.json" "[c['verified_by'] for c in d['checks'] if c['name']=='checkpoint'][0]") == epilog ]] ||
    fail "checkpoint not established by the epilog"
  [[ $(check_named "$job" checkpoint) == pass ]] || fail "checkpoint: $(reason_of "$job")"
  out=$(as_user "$PILOT" verdict "$job") || fail "pilot verdict $job"
  note "$out"
  grep -q "restore" <<<"$out" || fail "verdict without a restore line: $out"
  grep -q "compared by supervisor" <<<"$out" || fail "the restore line does not say whose figures: $out"
  [[ $(node_state) == idle* ]] || fail "node not idle: $(node_state)"
}

# Broken programs, each a NO-GO that names its reason; the node stays up.
case_broken() {
  local dir fault cfg
  dir=$(user_copy "$SRC/tests/program" program)
  declare -A expect=(
    [optimizer_not_saved]="losses diverge after resume from step 7"
    [resume_ignored]="reported step 1 first, not 6"
    [raise_on_resume]="KeyError"
    [nan]="loss is nan at step 3"
    [no_checkpoint]="no checkpoint"
    [oom]="ran out of memory at step 2"
    [hang]="hung: no metrics record for"
    [scheduler_reset]="learning rate differs after resume at step"
    [rng_not_restored]="not restored: torch CPU RNG state (rank 0)"
    [scheduler_stepped_twice]="LR scheduler (rank 0: last_epoch 6, saved last_epoch 5)"
    [data_not_restored]="not restored: data position"
    [state_outside]="restored; the losses still differ: state outside them"
    [leak]="memory_growth: resident memory grows"
    [no_metrics]="wrote no metrics records"
    [wrong_shape]="shape: the pilot's shape differs from the run's"
  )
  declare -A jobs=()
  for fault in "${!expect[@]}"; do
    cfg=$dir/$fault.toml
    # The hang is found after 8 s without a record; the others get 60 s, as
    # fifteen programs importing torch at once on a small node may take more
    # than 8 s to their first record.
    program_toml "$cfg" "broken-$fault" "$dir" 2 "[\"python3\", \"tiny.py\", \"--fault\", \"$fault\"]" \
      "step_timeout = $([[ $fault == hang ]] && echo 8 || echo 60)"
    jobs[$fault]=$(as_user sbatch --parsable -o "$TMP/slurm-%j.out" --pilot="$cfg" --pilot-stage=single --wrap true)
  done
  for fault in "${!expect[@]}"; do
    local job=${jobs[$fault]}
    wait_verdict "$job" 300
    [[ $(decision "$job") == NO-GO ]] || fail "$fault: job $job is $(decision "$job")"
    local why
    why=$(reason_of "$job")
    grep -qF "${expect[$fault]}" <<<"$why" || fail "$fault: reason does not say '${expect[$fault]}': $why"
    note "$fault -> $(paste -sd'|' <<<"$why")"
  done
  # optimizer_not_saved is also the epilog's finding, from the files.
  grep -q "checkpoint: no optimizer state" <<<"$(reason_of "${jobs[optimizer_not_saved]}")" ||
    fail "the epilog did not find the missing optimizer state: $(reason_of "${jobs[optimizer_not_saved]}")"
  wait_node_idle
  [[ $(node_state) == idle* ]] || fail "node not idle after the broken programs: $(node_state)"
}

# What real programs do and a pilot must take as correct, in one clean
# run of tiny.py: it saves on a schedule (checkpoint-5/, checkpoint-10/,
# the resumed process saving again), it needs a site variable of the job's
# environment (as mpi4py needs OMPI_MCA_*), and it trains in bf16 autocast.
# GO; the later save is told apart from step K's, the precision is what
# the probe saw, and memory is flat. Beside it, at the same time, a plain
# torchrun-style loop whose only pilot code is slurm_pilot.loop's three
# lines (loop_tiny.py), both stages (two DDP ranks in the node stage): GO,
# the restore bitwise and its state fingerprinted by the helper.
case_real_programs() {
  local dir job res got loop
  dir=$(user_copy "$SRC/tests/program" program-real)
  program_toml "$dir/real.toml" real "$dir" 2 \
    '["python3", "tiny.py", "--save-every", "5", "--autocast", "bf16", "--require-env", "SITE_FABRIC_TOKEN"]'
  program_toml "$dir/loop.toml" loop "$dir" 2 '["python3", "loop_tiny.py"]'
  job=$(submit_wait --export=ALL,SITE_FABRIC_TOKEN=ib0 --pilot="$dir/real.toml" --pilot-stage=single)
  loop=$(submit_wait --pilot="$dir/loop.toml")
  wait_verdict "$job"
  [[ $(decision "$job") == GO ]] || fail "job $job: $(decision "$job"): $(reason_of "$job") $(verdict_text "$job")"
  res=$STATE/jobs/$job/results.json
  got=$(json "$res" '" ".join(str(x) for x in [d["program"]["checkpoint_saves"]["at_step_files"] > 0, d["program"]["checkpoint_saves"]["later_files"] > 0, d["program"]["checkpoint_saves"]["later_example"].split("/")[0], d["program"]["checkpoint_saves"]["rewritten"]])')
  [[ $got == "True True checkpoint-10 False" ]] || fail "job $job: checkpoint_saves: $got"
  [[ $(check_named "$job" checkpoint_read) == pass ]] || fail "checkpoint_read: $(check_detail "$job" checkpoint_read)"
  [[ $(check_named "$job" checkpoint) == pass ]] || fail "checkpoint: $(check_detail "$job" checkpoint)"
  got=$(json "$STATE/verdicts/$job.json" "[c['status'] + ': ' + c['measured'] for c in d['checks'] if c['name']=='precision'][0]")
  [[ $got == "skip: bfloat16 autocast on cpu "* ]] || fail "job $job: precision: $got"
  [[ $(check_named "$job" memory_growth) == pass ]] || fail "memory_growth: $(check_detail "$job" memory_growth)"
  note "real_programs: job $job GO: $(check_detail "$job" checkpoint_read)"
  wait_verdict "$loop"
  [[ $(decision "$loop") == GO ]] || fail "loop job $loop: $(decision "$loop"): $(reason_of "$loop") $(verdict_text "$loop")"
  res=$STATE/jobs/$loop/results.json
  got=$(json "$res" '" ".join(str(x) for x in [d["stages"]["single"]["restore"]["mode"], d["stages"]["single"]["restore"]["equal"], d["stages"]["node"]["world_size"]])')
  [[ $got == "bitwise True 2" ]] || fail "loop job $loop: restore and ranks: $got"
  [[ $(check_named "$loop" checkpoint_read) == pass ]] || fail "loop: checkpoint_read: $(check_detail "$loop" checkpoint_read)"
  # What the program ran with, from the probe's packages lines: torch among
  # the installed distributions.
  got=$(json "$res" 'd["program"]["environment"]["distributions"].get("torch", "")')
  [[ -n $got ]] || fail "loop job $loop: torch not among the distributions recorded"
  note "real_programs: loop job $loop GO: $(check_detail "$loop" restore)"
}

# A program that writes no metrics but prints loss lines.
case_loss_pattern() {
  local dir job
  dir=$(user_copy "$SRC/tests/program" program-pattern)
  program_toml "$dir/pattern.toml" pattern "$dir" 1 '["python3", "print_loss.py"]' \
    'loss_pattern = "loss=([0-9.eE+-]+)"'
  job=$(submit_wait --pilot="$dir/pattern.toml")
  wait_verdict "$job"
  [[ $(json "$STATE/jobs/$job/results.json" 'd["program"]["metrics"]') == loss_pattern ]] ||
    fail "not judged through loss_pattern"
  [[ $(check_named "$job" restore) == pass ]] || fail "restore: $(reason_of "$job")"
  [[ $(check_named "$job" shape) == warn ]] || fail "a program without a shape is not binding"
  note "$(as_user "$PILOT" verdict "$job")"
}

# A fake Hugging Face hub cache of one model, org/tiny, whose ref main
# points at COMMIT (its snapshot's file a link into blobs/, as the hub
# writes them).
fake_hub() {  # fake_hub DIR COMMIT
  local repo=$1/models--org--tiny
  mkdir -p "$repo/refs" "$repo/blobs" "$repo/snapshots/$2"
  echo "{\"commit\": \"$2\"}" >"$repo/blobs/$2"
  ln -sfn "../../blobs/$2" "$repo/snapshots/$2/config.json"
  printf '%s' "$2" >"$repo/refs/main"
  chown -R "$TEST_USER" "$1"
}

# program.pin and program.hub_models (job/pins.h): two pilots of
# print_loss.py at once. One runs as submitted: its lock holds the pins, the
# hub commit and the run identity, which the signed verdict carries and
# `pilot verdict` shows. The other, whose folder is a git work tree, is
# held after submission while its pinned script is edited, a commit moves
# its HEAD and its hub ref moves to another commit: NO-GO, pins_unchanged
# naming all three. A pin that is not there refuses the submission, naming
# it.
case_pins() {
  local same moved job_same job_moved c1 c2 why lock out
  c1=$(printf 'a%.0s' {1..40}) c2=$(printf 'b%.0s' {1..40})
  same=$(user_copy "$SRC/tests/program" program-pins)
  moved=$(user_copy "$SRC/tests/program" program-pins-moved)
  for d in "$same" "$moved"; do
    fake_hub "$d/hub" "$c1"
    program_toml "$d/pins.toml" pins "$d" 1 '["python3", "print_loss.py"]' \
      'loss_pattern = "loss=([0-9.eE+-]+)"' 'pin = ["print_loss.py", "tiny.py"]' \
      'hub_models = ["org/tiny"]'
  done
  program_toml "$same/missing.toml" pins "$same" 1 '["python3", "print_loss.py"]' 'pin = ["nope.py"]'
  local git=(git -C "$moved" -c user.name=pilot -c user.email=pilot@localhost)
  as_user "${git[@]}" init -q
  as_user "${git[@]}" add -A
  as_user "${git[@]}" commit -q -m piloted
  if out=$(as_user sbatch --parsable --pilot="$same/missing.toml" --wrap true 2>&1); then
    fail "a missing pin was submitted: $out"
  fi
  grep -q "missing.toml:.*program.pin: $same/nope.py: no such file" <<<"$out" ||
    fail "the refusal does not name the pin: $out"
  job_moved=$(as_user env HF_HUB_CACHE="$moved/hub" sbatch --parsable --hold -o "$TMP/slurm-%j.out" \
    --pilot="$moved/pins.toml" --pilot-stage=single --wrap true)
  job_same=$(as_user env HF_HUB_CACHE="$same/hub" sbatch --parsable -o "$TMP/slurm-%j.out" \
    --pilot="$same/pins.toml" --pilot-stage=single --wrap true)
  echo "# edited after submission" >>"$moved/print_loss.py"
  as_user "${git[@]}" commit -q --allow-empty -m "after submission"
  fake_hub "$moved/hub" "$c2"
  as_user scontrol release "$job_moved"
  wait_verdict "$job_same" 300
  wait_verdict "$job_moved" 300

  lock=$STATE/jobs/$job_same/lock.json
  [[ $(check_named "$job_same" pins_unchanged) == pass ]] ||
    fail "job $job_same: pins_unchanged: $(check_detail "$job_same" pins_unchanged)"
  [[ $(json "$lock" '" ".join(p["name"] + "=" + p["commit"][:4] for p in d["pins"])') == "print_loss.py= tiny.py= org/tiny=aaaa" ]] ||
    fail "job $job_same: lock pins: $(json "$lock" 'd["pins"]')"
  [[ $(json "$lock" 'sum(l.startswith(("pin print_loss.py sha256:", "hub_model org/tiny commit " + "a" * 40)) for l in d["identity"]["lines"])') == 2 ]] ||
    fail "job $job_same: identity: $(json "$lock" 'd["identity"]')"
  [[ $(json "$STATE/verdicts/$job_same.json" 'd["identity"]["sha256"]') == $(json "$lock" 'd["identity"]["sha256"]') ]] ||
    fail "job $job_same: the verdict's identity is not the lock's"
  out=$(as_user "$PILOT" verdict "$job_same") || fail "pilot verdict $job_same"
  grep -q "identity .*sha256 $(json "$lock" 'd["identity"]["sha256"]')" <<<"$out" ||
    fail "pilot verdict shows no identity: $out"

  [[ $(decision "$job_moved") == NO-GO ]] || fail "job $job_moved: $(decision "$job_moved")"
  why=$(reason_of "$job_moved")
  grep -q "pins_unchanged: moved between submit and job start: print_loss.py: sha256 " <<<"$why" ||
    fail "job $job_moved: the edited script is not named: $why"
  grep -qF "hub model org/tiny: bbbbbbbbbbbb..., at submit aaaaaaaaaaaa..." <<<"$why" ||
    fail "job $job_moved: the moved hub ref is not named: $why"
  grep -qF "print_loss.py (git HEAD): " <<<"$why" || fail "job $job_moved: the moved git HEAD is not named: $why"
  note "pins: $job_same $(check_detail "$job_same" pins_unchanged); $job_moved: $(paste -sd'|' <<<"$why")"
  wait_node_idle
}

run_case "$@"
