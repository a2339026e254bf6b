#!/usr/bin/env bash
# The evidence of a pilot against its own user, on the local cluster: each
# case is an attack the job's user (the unprivileged test user) can make,
# and ends as the trust model says (docs/design.md, "Trust model").
#
#   evidence.sh CASE   CASE: forged_results export_active requeue reused_id
#                            hostile_env program_attacks
#
# Environment as for e2e.sh (lib.sh).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

results_of() { echo "$STATE/jobs/$1/results.json"; }

# Submits as the user without waiting; prints the job id.
submit() {  # submit SBATCH_ARGS... (the last ones may be --wrap CMD)
  local out
  out=$(as_user sbatch --parsable -o "$TMP/slurm-%j.out" "$@") || fail "sbatch: $out"
  echo "${out%%;*}"
}

reason_of() {  # reason_of JOB: every failing check's detail, one per line
  json "$STATE/verdicts/$1.json" "'\n'.join(c['name'] + ': ' + c['detail'] for c in d['checks'] if c['status']=='fail')"
}

verified_by() {  # verified_by JOB CHECK
  json "$STATE/verdicts/$1.json" "[c['verified_by'] for c in d['checks'] if c['name']=='$2'] or ['absent']" |
    tr -d "[]'"
}

# A failing restore (the optimizer state is not restored, a test switch
# the cluster's policy allows), while a process of the user outside the job
# rewrites everything it can reach with a passing copy of the results. The
# verdict must stay NO-GO and say who found the failure.
case_forged_results() {
  local job
  job=$(submit --pilot="$TINY" --pilot-stage=single --export=ALL,PILOT_RUNNER_TEST_SKIP_RESTORE=optimizer --wrap true)
  local work=$STATE/jobs/$job/work res
  res=$(results_of "$job")
  cat >"$TMP/forge.py" <<'PY'
import json, os, sys
src, work, job_results = sys.argv[1:4]
try:
    d = json.load(open(src))
except Exception:
    sys.exit(0)
d["exit_code"] = 0
r = d["stages"]["single"]["restore"]
r.update(ran=True, equal=True, skipped="", detail="", max_abs_loss_diff=0.0,
         max_rel_loss_diff=0.0, max_abs_param_diff=0.0, max_rel_param_diff=0.0)
text = json.dumps(d, indent=2)
for name in ("results.json", "resume.json"):
    try:
        tmp = os.path.join(work, name + ".forged")
        open(tmp, "w").write(text)
        os.replace(tmp, os.path.join(work, name))
    except OSError:
        pass
try:
    open(job_results, "w").write(text)
    open(os.path.join(os.path.dirname(work), "BREACH"), "w").write("wrote results.json\n")
except OSError:
    pass
PY
  chmod 0644 "$TMP/forge.py"
  # Until the verdict exists (at most 4 minutes): forge from the
  # supervisor's (readable) results, or from an earlier job's when there is none yet.
  as_user bash -c '
    for ((i = 0; i < 1200; i++)); do
      [[ -e '"$STATE/verdicts/$job.json"' || -e '"$TMP/stop"' ]] && break
      src='"$res"'; [[ -f $src ]] || src='"$TMP/seed.json"'
      python3 '"$TMP/forge.py"' "$src" '"$work"' '"$res"' 2>/dev/null || true
      sleep 0.2
    done' &
  BACKGROUND+=($!)
  wait_verdict "$job" 240
  touch "$TMP/stop"
  [[ ! -e $STATE/jobs/$job/BREACH ]] || fail "the user wrote into the job's folder"
  [[ $(stat -c %U "$res") == root ]] || fail "results.json is not root's: $(stat -c '%U %a' "$res")"
  [[ $(decision "$job") == NO-GO ]] || fail "forged results gave $(decision "$job"): $(verdict_text "$job")"
  [[ $(check_named "$job" restore) == fail ]] || fail "restore check: $(check_named "$job" restore)"
  [[ $(verified_by "$job" restore) == supervisor ]] ||
    fail "restore established by $(verified_by "$job" restore), not the supervisor"
  [[ $(json "$res" 'd["stages"]["single"]["restore"]["skipped"]') == optimizer ]] ||
    fail "the supervisor's results do not show the skipped restore"
  [[ $(json "$res" '",".join(d["supervisor"]["test_switches"])') == PILOT_RUNNER_TEST_SKIP_RESTORE ]] ||
    fail "test switch not recorded"
  grep -q '"equal": true' "$work/results.json" 2>/dev/null || fail "the forger did not run (nothing was tested)"
  local out rc=0
  out=$("$PILOT" grant --policy "$POLICY" --dry-run --nodes 1 "$job" 2>&1) || rc=$?
  ((rc != 0)) || fail "pilot grant accepted job $job: $out"
  note "forged work/results.json: job $job NO-GO (restore: fail, verified_by supervisor); grant: $(head -n1 <<<"$out")"
}

# SLURM_PILOT_ACTIVE exported into the job: the pilot runs regardless, the
# user's batch script does not.
case_export_active() {
  local job
  job=$(submit --pilot="$TINY" --pilot-stage=single --export=ALL,SLURM_PILOT_ACTIVE=1 \
          --wrap "echo ran > $TMP/user-script-ran")
  wait_verdict "$job"
  [[ ! -e $TMP/user-script-ran ]] || fail "the user's script ran in place of the pilot"
  [[ $(decision "$job") == GO ]] || fail "job $job: $(verdict_text "$job")"
  [[ $(json "$(results_of "$job")" 'd["supervisor"]["processes"][0]["role"]') == single ]] ||
    fail "the supervisor did not run the single stage"
  note "SLURM_PILOT_ACTIVE exported: pilot ran (GO), the batch script did not"
}

# A requeued job is a new instance of its pilot: the prolog moves the old
# one aside, the pilot runs again (runner.started is the new instance's),
# and the first verdict is kept.
case_requeue() {
  local job first second
  job=$(submit --requeue --pilot="$TINY" --pilot-stage=single \
          --export=ALL,PILOT_RUNNER_TEST_SKIP_RESTORE=optimizer --wrap "echo ran > $TMP/user-script-ran")
  wait_verdict "$job"
  [[ $(decision "$job") == NO-GO ]] || fail "first run: $(decision "$job")"
  first=$(json "$STATE/verdicts/$job.json" 'd["instance"]')
  [[ -n $first ]] || fail "the verdict names no instance"
  local started_before
  started_before=$(cat "$STATE/jobs/$job/runner.started")
  scontrol requeue "$job" || fail "scontrol requeue $job"
  # The new instance: a new lock, then a new verdict.
  local i
  for ((i = 0; i < 600; i++)); do
    second=$(json "$STATE/verdicts/$job.json" 'd.get("instance", "")' 2>/dev/null || true)
    [[ -n $second && $second != "$first" ]] && break
    sleep 0.5
  done
  [[ $second != "$first" ]] || fail "no verdict of a second instance after the requeue"
  sleep 0.5
  [[ ! -e $TMP/user-script-ran ]] || fail "the user's script ran after the requeue"
  [[ $(cat "$STATE/jobs/$job/runner.started") != "$started_before" ]] || fail "runner.started is stale"
  [[ $(json "$(results_of "$job")" 'd["instance"]') == "$second" ]] || fail "results of another instance"
  [[ -d $STATE/attic/$job-$first ]] || fail "the first instance was not moved aside: $(ls "$STATE/attic")"
  [[ $(stat -c '%U %a' "$STATE/attic") == "root 700" ]] || fail "attic: $(stat -c '%U %a' "$STATE/attic")"
  # The first verdict is kept, the newest shown.
  local kept
  kept=$(grep -l "\"instance\": \"$first\"" "$STATE"/verdicts/history/"$job"-*.json 2>/dev/null | head -n1)
  [[ -n $kept ]] || fail "the first verdict was overwritten (no history entry)"
  local out
  out=$(as_user "$PILOT" verdict "$job" --all) || fail "pilot verdict --all"
  [[ $(grep -c "^job $job " <<<"$out") -ge 2 ]] || fail "--all shows one verdict: $out"
  note "requeue: instance $first -> $second; first verdict kept in history"
}

# Slurm hands out a job id again (controller state wiped): the next user of
# the id gets a fresh folder, never the earlier owner's work/ or results.
case_reused_id() {
  local other=${PILOT_TEST_USER2:-pilotuser2}
  id "$other" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$other"
  local a_job b_job
  a_job=$(submit --pilot="$TINY" --pilot-stage=single --wrap true)
  wait_verdict "$a_job"
  echo "secret weights of $TEST_USER" >"$STATE/jobs/$a_job/work/secret"
  chown "$TEST_USER" "$STATE/jobs/$a_job/work/secret"
  chmod 0600 "$STATE/jobs/$a_job/work/secret"
  local a_instance
  a_instance=$(json "$STATE/verdicts/$a_job.json" 'd["instance"]')
  restart_controller_wiped
  # Ids start again: burn those below the earlier pilot's with held jobs of
  # the other user, then submit the other user's pilot, which gets its id.
  local cfg=$TMP/other.toml out b_job=0 n
  install -m 0644 -o "$other" "$TINY_SRC" "$cfg"
  as_other() { (cd "$TMP" && runuser -u "$other" -- env SLURM_CONF="$SLURM_CONF" PATH=/usr/local/bin:/usr/bin:/bin "$@"); }
  for ((n = 0; n < a_job + 5; n++)); do
    out=$(as_other sbatch --parsable -o /dev/null --hold --wrap true) || fail "sbatch as $other: $out"
    b_job=${out%%;*}
    scancel "$b_job"
    ((b_job + 1 < a_job)) || break
  done
  ((b_job + 1 == a_job)) || fail "job ids did not start again below $a_job (got $b_job)"
  out=$(as_other sbatch --parsable -o "$TMP/other-%j.out" --pilot="$cfg" --pilot-stage=single --wrap true) ||
    fail "sbatch --pilot as $other: $out"
  b_job=${out%%;*}
  ((b_job == a_job)) || fail "the pilot of $other got job id $b_job, not $a_job"
  # Wait for the new verdict (of another instance).
  local i inst=""
  for ((i = 0; i < 480; i++)); do
    inst=$(json "$STATE/verdicts/$b_job.json" 'd.get("instance", "")' 2>/dev/null || true)
    [[ -n $inst && $inst != "$a_instance" ]] && break
    sleep 0.5
  done
  [[ -n $inst && $inst != "$a_instance" ]] || fail "no verdict for the second use of job id $a_job"
  local work=$STATE/jobs/$b_job/work
  [[ $(stat -c %U "$work") == "$other" ]] || fail "work/ belongs to $(stat -c %U "$work")"
  [[ ! -e $work/secret ]] || fail "$other got $TEST_USER's files"
  [[ $(json "$STATE/verdicts/$b_job.json" 'd["job"]["user"]') == "$other" ]] || fail "verdict of another user"
  [[ -f $STATE/attic/$a_job-$a_instance/work/secret ]] || fail "the earlier instance is not in the attic"
  runuser -u "$other" -- cat "$STATE/attic/$a_job-$a_instance/work/secret" >/dev/null 2>&1 &&
    fail "$other can read the earlier owner's files"
  note "job id $a_job reused: $other got a fresh folder; $TEST_USER's instance is in the attic"
}

# The job's environment carries a preload and the runner's internal device
# baseline; the workload's folder holds links to root-only files. None of it
# reaches the evidence or a root-run report.
case_hostile_env() {
  local job
  job=$(submit --pilot="$TINY" --pilot-stage=single \
          --export=ALL,LD_PRELOAD=/nonexistent/evil.so,PILOT_DEVICE_BASELINE=123456789,PYTHONPATH=/tmp \
          --wrap true)
  wait_verdict "$job"
  [[ $(decision "$job") == GO ]] || fail "job $job: $(verdict_text "$job")"
  local res names
  res=$(results_of "$job")
  names=$(json "$res" '" ".join(d["supervisor"]["environment"])')
  for v in LD_PRELOAD PILOT_DEVICE_BASELINE PYTHONPATH SLURM_PILOT_ACTIVE; do
    [[ " $names " != *" $v "* ]] || fail "$v reached the workload: $names"
  done
  grep -q "ld.so: object '/nonexistent/evil.so'" "$TMP/slurm-$job.out" && fail "the preload was tried: $(cat "$TMP/slurm-$job.out")"
  # The node's ptrace setting, as the supervisor found it.
  local scope=-1
  [[ -r /proc/sys/kernel/yama/ptrace_scope ]] && scope=$(cat /proc/sys/kernel/yama/ptrace_scope)
  [[ $(json "$res" 'd["supervisor"]["ptrace_scope"]') == "$scope" ]] || fail "ptrace_scope not recorded as $scope"
  # A root-only secret linked into the user's work folder.
  echo "root-only-secret-$RANDOM" >"$TMP/root-secret"
  chmod 0600 "$TMP/root-secret"
  local secret
  secret=$(cat "$TMP/root-secret")
  local work=$STATE/jobs/$job/work
  as_user rm -f "$work/metrics.jsonl"
  as_user ln -s "$TMP/root-secret" "$work/metrics.jsonl"
  local out
  out=$("$PILOT" report --policy "$POLICY" -o "$TMP/report.html" "$job" 2>&1) || fail "root pilot report: $out"
  grep -qF "$secret" "$TMP/report.html" && fail "the report shows a root-only file"
  grep -q "is a symbolic link" <<<"$out" || fail "the refusal is not reported: $out"
  note "hostile env dropped ($names); linked metrics left out of root's report"
}

# A user's program against its own pilot (program mode), six jobs at once:
#  - a clean program while a process of the user outside every job writes
#    records in its name to the phases' sockets: NO-GO naming the writer;
#  - a reference process whose daemon (setsid, double fork) reports every
#    step in rank 0's name and lingers: NO-GO (a step reported twice), the
#    daemon killed and named in results.json, nothing of the user left;
#  - a resumed process that never opens its checkpoint but reports the
#    reference's losses (it trains steps 1..K again): the restore passes as
#    the workload's figures compared by the supervisor, checkpoint_read
#    fails, NO-GO;
#  - standard error with a latin-1 byte and progress bars cut inside a
#    character: GO, results.json valid UTF-8;
#  - a failure whose standard error repaints its line with terminal escapes:
#    `pilot verdict` shows the escapes as text, never the bytes;
#  - a program that reports made-up losses without training, saving and
#    restoring its checkpoint as a clean one does: NO-GO from busy (its
#    processes kept no CPU busy while it reported steps).
case_program_attacks() {
  local dir fault cfg cmd
  dir=$(user_copy "$SRC/tests/program" program)
  declare -A jobs=()
  for fault in clean escaped_forger retrain_on_resume open_retrain stderr_bytes escape_crash fake_training; do
    cfg=$dir/$fault.toml
    cmd='["python3", "tiny.py"]'
    [[ $fault == clean ]] || cmd="[\"python3\", \"tiny.py\", \"--fault\", \"$fault\"]"
    program_toml "$cfg" "attack-$fault" "$dir" 2 "$cmd" "step_timeout = 60"
    jobs[$fault]=$(submit --pilot="$cfg" --pilot-stage=single --wrap true)
  done
  # The pinned program whose resume raises, with a sitecustomize.py on the
  # submitting shell's PYTHONPATH that drops the fault in the resumed
  # process only: the same run identity, a different program.
  mkdir -p "$dir/hooks"
  cat >"$dir/hooks/sitecustomize.py" <<'PY'
import os, sys
if os.environ.get("PILOT_PROCESS") == "resumed" and "--fault" in sys.argv:
    at = sys.argv.index("--fault")
    del sys.argv[at:at + 2]
PY
  chown -R "$TEST_USER" "$dir/hooks"
  program_toml "$dir/hooked.toml" attack-hooked "$dir" 2 '["python3", "tiny.py", "--fault", "raise_on_resume"]' \
    "step_timeout = 60"
  jobs[hooked]=$(submit --pilot="$dir/hooked.toml" --pilot-stage=single --export=ALL,PYTHONPATH="$dir/hooks" --wrap true)
  # Reads its whole checkpoint, throws it away and trains steps 1..K again
  # unreported (steps of 0.7 CPU-s, K = 5: enough work to tell).
  program_toml "$dir/reread.toml" attack-reread "$dir" 2 \
    '["python3", "tiny.py", "--step-cpu", "0.7", "--fault", "reread_retrain"]' "step_timeout = 60"
  jobs[reread_retrain]=$(submit --pilot="$dir/reread.toml" --pilot-stage=single --wrap true)
  local clean=${jobs[clean]}
  cat >"$TMP/outsider.py" <<'PY'
import os, socket, sys, time
folder, verdict, log = sys.argv[1:4]
with open(log, "a") as out:
    end = time.time() + 300
    while time.time() < end and not os.path.exists(verdict):
        for name in ("single-reference.sock", "single-resumed.sock"):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(os.path.join(folder, name))
                # The supervisor judges a connection by its peer, on accept,
                # and may close it before anything is sent.
                out.write("connected %s\n" % name)
                out.flush()
                s.sendall(b"".join(b'{"step": %d, "loss": 0.25, "rank": 0}\n' % i for i in range(1, 11)))
            except OSError:
                pass
            finally:
                s.close()
        time.sleep(0.5)
PY
  chmod 0644 "$TMP/outsider.py"
  as_user python3 "$TMP/outsider.py" "$STATE/jobs/$clean/metrics" "$STATE/verdicts/$clean.json" \
    "$TMP/outsider.log" &
  local outsider=$!
  for fault in "${!jobs[@]}"; do wait_verdict "${jobs[$fault]}" 300; done
  wait "$outsider" || true
  local why
  # The outsider.
  grep -q connected "$TMP/outsider.log" || fail "the outsider never reached a socket: the case proves nothing"
  [[ $(decision "$clean") == NO-GO ]] || fail "outsider: job $clean is $(decision "$clean")"
  why=$(reason_of "$clean")
  grep -q "a process outside the pilot tried to write" <<<"$why" || fail "outsider not named: $why"
  grep -q "(python3), uid $(id -u "$TEST_USER")" <<<"$why" || fail "outsider's process not named: $why"
  note "outsider -> $why"
  # The escaped daemon.
  local job=${jobs[escaped_forger]}
  [[ $(decision "$job") == NO-GO ]] || fail "escaped_forger: job $job is $(decision "$job")"
  why=$(reason_of "$job")
  grep -q "broke the records protocol" <<<"$why" || fail "escaped_forger: no protocol break named: $why"
  [[ $(json "$(results_of "$job")" 'len(d["program"]["outlived"])') -ge 1 ]] ||
    fail "escaped_forger: the daemon is not named in results.json"
  note "escaped_forger -> $why; outlived: $(json "$(results_of "$job")" 'd["program"]["outlived"]')"
  # The resumed process that never read its checkpoint.
  job=${jobs[retrain_on_resume]}
  [[ $(decision "$job") == NO-GO ]] || fail "retrain_on_resume: job $job is $(decision "$job")"
  # Its losses equal the reference's, but the restore it claims starts
  # from freshly seeded generators: the restore names the state too.
  [[ $(json "$(results_of "$job")" 'd["stages"]["single"]["restore"]["max_abs_loss_diff"]') == 0.0 ]] ||
    fail "retrain_on_resume: its losses should compare equal"
  grep -q "from another state than the one saved" <<<"$(check_detail "$job" restore)" ||
    fail "retrain_on_resume: restore $(check_named "$job" restore): $(check_detail "$job" restore)"
  [[ $(verified_by "$job" restore) == workload_compared ]] ||
    fail "restore labelled $(verified_by "$job" restore), not workload_compared"
  [[ $(check_named "$job" checkpoint_read) == fail ]] || fail "checkpoint_read: $(check_named "$job" checkpoint_read)"
  grep -q "never opened the checkpoint" <<<"$(check_detail "$job" checkpoint_read)" ||
    fail "checkpoint_read: $(check_detail "$job" checkpoint_read)"
  [[ $(verified_by "$job" checkpoint_read) == supervisor ]] || fail "checkpoint_read not the supervisor's"
  # The resumed process that opened every checkpoint file and read none:
  # what it read, not what it opened, is counted.
  job=${jobs[open_retrain]}
  [[ $(decision "$job") == NO-GO ]] || fail "open_retrain: job $job is $(decision "$job")"
  [[ $(check_named "$job" checkpoint_read) == fail ]] || fail "open_retrain: checkpoint_read $(check_named "$job" checkpoint_read)"
  grep -q "opened 1 of 1 files but left most of the checkpoint unread" <<<"$(check_detail "$job" checkpoint_read)" ||
    fail "open_retrain: checkpoint_read: $(check_detail "$job" checkpoint_read)"
  note "open_retrain -> $(json "$STATE/verdicts/$job.json" '[c["measured"] for c in d["checks"] if c["name"] == "checkpoint_read"][0]')"
  # Bytes that are not UTF-8 on standard error.
  job=${jobs[stderr_bytes]}
  [[ $(decision "$job") == GO ]] || fail "stderr_bytes: job $job: $(reason_of "$job") $(verdict_text "$job")"
  python3 -c 'import sys; open(sys.argv[1], encoding="utf-8", errors="strict").read()' "$(results_of "$job")" ||
    fail "stderr_bytes: results.json is not valid UTF-8"
  [[ $(check_named "$job" checkpoint_read) == pass ]] || fail "stderr_bytes: checkpoint_read $(check_named "$job" checkpoint_read)"
  # An honest resume: the page cache told what it read, and it read it.
  [[ $(json "$STATE/verdicts/$job.json" '[c["measured"] for c in d["checks"] if c["name"] == "checkpoint_read"][0]') == "read "*" (100.0%) in "* ]] ||
    fail "stderr_bytes: checkpoint_read measured $(json "$STATE/verdicts/$job.json" '[c["measured"] for c in d["checks"] if c["name"] == "checkpoint_read"][0]')"
  # Escapes in a reason, as a terminal would get them.
  job=${jobs[escape_crash]}
  [[ $(decision "$job") == NO-GO ]] || fail "escape_crash: job $job is $(decision "$job")"
  local out
  out=$(as_user "$PILOT" verdict "$job") || fail "pilot verdict $job"
  grep -q "restore fail" <<<"$out" || fail "escape_crash: the reason is not shown: $out"
  if LC_ALL=C grep -q $'[\x1b\r]' <<<"$out"; then fail "pilot verdict printed raw escapes: $(od -c <<<"$out" | head)"; fi
  grep -qF '\x1b' <<<"$out" || fail "escape_crash: the escape is not shown as text: $out"
  # Losses without training.
  job=${jobs[fake_training]}
  [[ $(decision "$job") == NO-GO ]] || fail "fake_training: job $job is $(decision "$job")"
  [[ $(check_named "$job" busy) == fail ]] || fail "fake_training: busy $(check_named "$job" busy): $(reason_of "$job")"
  [[ $(check_named "$job" restore) == pass && $(check_named "$job" checkpoint_read) == pass ]] ||
    fail "fake_training: only busy should fail: $(reason_of "$job")"
  [[ $(check_named "${jobs[stderr_bytes]}" busy) != fail ]] || fail "a training program counted as idle: $(reason_of "${jobs[stderr_bytes]}")"
  note "fake_training -> $(check_detail "$job" busy)"
  # The hook outside the pins did not run: the resume raised, as pinned.
  job=${jobs[hooked]}
  [[ $(decision "$job") == NO-GO ]] || fail "hooked: job $job is $(decision "$job")"
  grep -q "KeyError" <<<"$(reason_of "$job")" || fail "hooked: the pinned fault is not named: $(reason_of "$job")"
  note "hooked -> $(reason_of "$job")"
  # The retrain that read every byte: what root saw names it.
  job=${jobs[reread_retrain]}
  [[ $(decision "$job") == NO-GO ]] || fail "reread_retrain: job $job is $(decision "$job")"
  [[ $(check_named "$job" checkpoint_read) == pass ]] ||
    fail "reread_retrain: it read the checkpoint: $(reason_of "$job")"
  [[ $(json "$(results_of "$job")" 'd["stages"]["single"]["restore"]["max_abs_loss_diff"]') == 0.0 ]] ||
    fail "reread_retrain: its losses compare equal: $(reason_of "$job")"
  [[ $(check_named "$job" resumed_work) == fail ]] || fail "reread_retrain: resumed_work $(check_named "$job" resumed_work)"
  [[ $(check_named "$clean" resumed_work) != fail ]] || fail "clean: resumed_work failed: $(check_detail "$clean" resumed_work)"
  note "reread_retrain -> $(check_detail "$job" resumed_work)"
  # Nothing of the user's survives the pilots.
  sleep 1
  if pgrep -u "$TEST_USER" -f tiny.py >/dev/null; then
    fail "processes of the user outlived their pilots: $(pgrep -a -u "$TEST_USER" -f tiny.py)"
  fi
  wait_node_idle
}

# Restarts the cluster with the controller's state wiped (job ids start
# again; the pilot state folder stays), as `local-slurm` does it.
restart_controller_wiped() {
  "$SRC/scripts/local-slurm" down --wipe-controller >/dev/null || fail "local-slurm down --wipe-controller"
  PILOT_JOB_USER=$TEST_USER "$SRC/scripts/local-slurm" up "$BUILD" >/dev/null ||
    fail "local-slurm up after the wipe"
}

run_case "$@"
