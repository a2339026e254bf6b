#!/usr/bin/env bash
# End-to-end tests of slurm-pilot on the local cluster of scripts/local-slurm
# (CTest label `slurm`; tests/slurm/CMakeLists.txt starts and stops the
# cluster as a fixture). Jobs run as a non-root user so the trust model is
# exercised for real.
#
#   e2e.sh CASE      CASE: sbatch_go srun_salloc submit_refused config_edited
#                          cancelled time_limit outbox nested_srun registry
#                          store_perms node_srun preflight staged_paths
#
# Environment: PILOT_SOURCE_DIR, PILOT_BUILD_DIR, PILOT_CLUSTER_DIR,
# PILOT_TEST_USER (default pilotuser), PILOT_E2E_STAGE (the stage of the
# GO case, default all).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# ---- cases ------------------------------------------------------------------

case_sbatch_go() {
  local port job
  port=$(free_port)
  start_receiver "$port" "$TMP/recv"
  set_notify "http://127.0.0.1:$port/verdicts"
  job=$(submit_wait --pilot="$TINY" --pilot-stage="${PILOT_E2E_STAGE:-all}")
  wait_verdict "$job"
  [[ $(decision "$job") == GO ]] || fail "job $job: $(decision "$job"): $(verdict_text "$job")"
  local out
  out=$("$PILOT" verdict --policy "$POLICY" "$job") || fail "pilot verdict $job: exit $?"
  grep -q "signature valid" <<<"$out" || fail "signature not valid: $out"
  note "$out"
  # The user sees it as their latest verdict, and checks its signature.
  out=$(as_user "$PILOT" verdict) || fail "user's pilot verdict failed"
  grep -q "^job $job " <<<"$out" || fail "user's latest is not job $job: $out"
  grep -q "valid (ed25519" <<<"$out" || fail "the user cannot check the signature: $out"
  # A copy checked offline, as any user, and a copy with one byte changed.
  cp "$STATE/verdicts/$job.json" "$TMP/copy.json"
  chmod 0644 "$TMP/copy.json"
  as_user "$PILOT" verify-verdict "$TMP/copy.json" >/dev/null || fail "verify-verdict of an intact copy"
  sed -i 's/"decision": "GO"/"decision": "NO-GO"/' "$TMP/copy.json"
  as_user "$PILOT" verify-verdict "$TMP/copy.json" >/dev/null 2>&1 && fail "verify-verdict accepted an edited copy"
  # Who established what: the supervisor's results, honestly labelled.
  [[ $(json "$STATE/verdicts/$job.json" "[c['verified_by'] for c in d['checks'] if c['name']=='restore'][0]") == supervisor ]] ||
    fail "restore not established by the supervisor"
  [[ $(json "$STATE/verdicts/$job.json" "[c['verified_by'] for c in d['checks'] if c['name']=='checkpoint'][0]") == epilog ]] ||
    fail "checkpoint not established by the epilog"
  # Root's, readable by root and the job's user only (an ACL entry: mode
  # 640 shows its mask, the owning group root's).
  [[ $(stat -c '%U %G %a' "$STATE/jobs/$job/results.json") == "root root 640" ]] ||
    fail "results.json not root's alone: $(stat -c '%U %G %a' "$STATE/jobs/$job/results.json")"
  as_user head -c1 "$STATE/jobs/$job/results.json" >/dev/null || fail "the job's user cannot read results.json"
  # The receiver got it, with a valid signature header.
  wait_for_file "$TMP/recv/log" 20
  grep -q "^1 good$" "$TMP/recv/log" || fail "receiver: $(cat "$TMP/recv/log")"
  [[ $(json "$TMP/recv/1.json" 'd["job"]["id"]') == "$job" ]] || fail "receiver got another job"
  cmp -s "$TMP/recv/1.json" "$STATE/verdicts/$job.json" || fail "posted body != stored verdict"
}

case_srun_salloc() {
  local out job
  out=$(as_user srun -v --pilot="$TINY" --pilot-stage=single true 2>&1) || fail "srun: $out"
  [[ $out =~ StepId=([0-9]+)\. ]] || fail "no job id in: $out"
  job=${BASH_REMATCH[1]}
  wait_verdict "$job"
  [[ $(decision "$job") == GO ]] || fail "srun job $job: $(verdict_text "$job")"
  note "srun --pilot: job $job GO"
  out=$(as_user salloc --pilot="$TINY" --pilot-stage=single -n1 \
          bash -c 'echo JOB=$SLURM_JOB_ID; srun -n1 true' 2>&1) || fail "salloc: $out"
  [[ $out =~ JOB=([0-9]+) ]] || fail "no job id in: $out"
  job=${BASH_REMATCH[1]}
  wait_verdict "$job"
  [[ $(decision "$job") == GO ]] || fail "salloc job $job: $(verdict_text "$job")"
  note "salloc --pilot: job $job GO"
}

case_submit_refused() {
  local bad before after out rc=0
  bad=$(user_config bad.toml 's/^seq_len = 64/seq_len = 0/')
  local line
  line=$(grep -n '^seq_len = 0' "$bad" | cut -d: -f1)
  before=$(squeue -h -t all -o '%i' | sort -n | tail -n1)
  out=$(as_user sbatch --pilot="$bad" --wrap true 2>&1) || rc=$?
  ((rc != 0)) || fail "sbatch accepted a broken config: $out"
  grep -q "^pilot: $bad:$line: run.seq_len: " <<<"$out" || fail "message without file:line: $out"
  grep -q "Submitted batch job" <<<"$out" && fail "a job was created: $out"
  after=$(squeue -h -t all -o '%i' | sort -n | tail -n1)
  [[ $before == "$after" ]] || fail "a job appeared: $before -> $after"
  # srun and salloc refuse it the same way.
  rc=0
  out=$(as_user srun --pilot="$bad" true 2>&1) || rc=$?
  ((rc != 0)) && grep -q "^pilot: $bad:$line: " <<<"$out" || fail "srun: $out"
  note "refused: $(head -n1 <<<"$out")"
}

case_config_edited() {
  local cfg out job
  cfg=$(user_config edit.toml)
  out=$(as_user sbatch --parsable --begin=now+6 --pilot="$cfg" -o "$TMP/slurm-%j.out" --wrap true)
  job=${out%%;*}
  as_user sed -i 's/^steps = 12/steps = 14/' "$cfg"
  wait_verdict "$job" 240
  [[ $(decision "$job") == NO-GO ]] || fail "edited config gave $(decision "$job")"
  verdict_text "$job" | grep -q "changed between submission and job start" ||
    fail "verdict does not name the change: $(verdict_text "$job")"
  verdict_text "$job" | grep -qF "$cfg" || fail "verdict does not name the file"
  note "config edited: job $job NO-GO"
}

case_cancelled() {
  local out job
  out=$(as_user sbatch --parsable --pilot="$TINY" -o "$TMP/slurm-%j.out" --wrap true)
  job=${out%%;*}
  wait_for_file "$STATE/jobs/$job/runner.started" 60
  sleep 2
  scancel "$job"
  wait_verdict "$job"
  [[ $(decision "$job") == NO-GO ]] || fail "cancelled job gave $(decision "$job")"
  verdict_text "$job" | grep -q "did not finish" || fail "no reason: $(verdict_text "$job")"
  wait_node_idle
  note "cancelled: job $job NO-GO, node $(node_state)"
}

case_time_limit() {
  local dir out job
  # A pilot far longer than its one-minute limit: a program that reports one
  # step and then waits, so the minute costs no CPU (a training runner ended
  # by Slurm under the supervisor is case_cancelled's).
  dir=$TMP/time-limit
  mkdir -p "$dir"
  chown "$TEST_USER" "$dir"
  program_toml "$dir/long.toml" long "$dir" 1 '["/bin/sh", "-c", "echo loss=1.0; exec sleep 100000"]' \
    'loss_pattern = "loss=([0-9.]+)"'
  out=$(as_user sbatch --parsable --time=1 --pilot="$dir/long.toml" --pilot-stage=single \
          -o "$TMP/slurm-%j.out" --wrap true)
  job=${out%%;*}
  wait_verdict "$job" 240
  [[ $(decision "$job") == NO-GO ]] || fail "timed-out job gave $(decision "$job")"
  verdict_text "$job" | grep -q "did not finish" || fail "no reason: $(verdict_text "$job")"
  wait_node_idle
  note "time limit: job $job NO-GO, node $(node_state)"
}

case_outbox() {
  local port job
  port=$(free_port)
  set_notify "http://127.0.0.1:$port/verdicts"   # nobody listens yet
  job=$(submit_wait --pilot="$TINY" --pilot-stage=single)
  wait_verdict "$job"
  local queued=$STATE/outbox/$job.json
  wait_for_file "$queued" 60
  cmp -s "$queued" "$STATE/verdicts/$job.json" || fail "queued body != stored verdict"
  start_receiver "$port" "$TMP/recv"
  local out
  out=$("$PILOT" flush --policy "$POLICY") || fail "pilot flush: exit $?: $out"
  note "$out"
  [[ ! -e $queued ]] || fail "still queued after flush"
  grep -q "^1 good$" "$TMP/recv/log" || fail "receiver: $(cat "$TMP/recv/log")"
  cmp -s "$TMP/recv/1.json" "$STATE/verdicts/$job.json" || fail "delivered body differs"
}

case_nested_srun() {
  local out job
  out=$(as_user salloc --pilot="$TINY" --pilot-stage=single -n1 bash -c \
    'echo JOB=$SLURM_JOB_ID; srun -n1 true;
     srun -n1 bash -c "echo NESTED active=\${SLURM_PILOT_ACTIVE:-none} option=\${SLURM_SPANK__SLURM_SPANK_OPTION_pilot_pilot:-none}"' 2>&1) ||
    fail "salloc: $out"
  [[ $out =~ JOB=([0-9]+) ]] || fail "no job id: $out"
  job=${BASH_REMATCH[1]}
  grep -q "^NESTED active=none option=$TINY$" <<<"$out" ||
    fail "the second step did not run its own command with the option inherited: $out"
  [[ $(cut -d" " -f2 "$STATE/jobs/$job/runner.started") == 0 ]] || fail "runner claimed by another step"
  wait_verdict "$job"
  note "nested srun: ran its own command; pilot ran once (step 0)"
}

case_registry() {
  local port=5000
  # SO_REUSEADDR: a listener makes it busy, an earlier case's closed
  # connections (TIME_WAIT) do not.
  if ! python3 -c 'import socket; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1",5000)); s.listen()' 2>/dev/null; then
    fail "port 5000 is busy (the policy's insecure registry)"
  fi
  mkdir -p "$TMP/registry"
  cat >"$TMP/registry.yml" <<YML
version: 0.1
storage:
  filesystem:
    rootdirectory: $TMP/registry
http:
  addr: 127.0.0.1:$port
YML
  /usr/bin/docker-registry serve "$TMP/registry.yml" >"$TMP/registry.log" 2>&1 &
  BACKGROUND+=($!)
  local i
  for ((i = 0; i < 50; i++)); do
    curl -fs "http://127.0.0.1:$port/v2/" >/dev/null && break
    sleep 0.2
  done
  local base=http://127.0.0.1:$port d1 d2 cfg out job
  d1=$(python3 "$SRC/tests/slurm/registry.py" push "$base" pilot/tiny v1 one)
  cfg=$(user_config image.toml)
  printf '\n[container]\nimage = "127.0.0.1:%s/pilot/tiny:v1"\n' "$port" >>"$cfg"
  out=$(as_user sbatch --parsable --pilot="$cfg" -o "$TMP/slurm-%j.out" --wrap true)
  job=${out%%;*}
  wait_for_file "$STATE/jobs/$job/lock.json" 60
  local lock=$STATE/jobs/$job/lock.json
  [[ $(json "$lock" 'd["container"]["digest"]') == "$d1" ]] ||
    fail "lock digest $(json "$lock" 'd["container"]') != pushed $d1"
  [[ $(json "$lock" 'd["container"]["pinned"]') == "127.0.0.1:$port/pilot/tiny@$d1" ]] ||
    fail "pinned: $(json "$lock" 'd["container"]["pinned"]')"
  # Move the tag while the job runs.
  d2=$(python3 "$SRC/tests/slurm/registry.py" push "$base" pilot/tiny v1 two)
  [[ $d1 != "$d2" ]] || fail "the tag did not move"
  wait_verdict "$job"
  [[ $(check_named "$job" container_tag) == warn ]] ||
    fail "no container_tag warning: $(verdict_text "$job")"
  verdict_text "$job" | grep -q "moved during the job" || fail "warning without detail"
  note "registry: tag -> $d1 in lock.json; moved to $d2 -> warning"
}

case_store_perms() {
  local job
  job=$(submit_wait --pilot="$TINY" --pilot-stage=single)
  wait_verdict "$job"
  local v=$STATE/verdicts/$job.json
  [[ $(stat -c '%U %a' "$STATE/verdicts") == "root 755" ]] || fail "store: $(stat -c '%U %a' "$STATE/verdicts")"
  [[ $(stat -c '%U %a' "$v") == "root 644" ]] || fail "verdict: $(stat -c '%U %a' "$v")"
  as_user sh -c "echo x >> '$v'" 2>/dev/null && fail "the user could write $v"
  as_user touch "$STATE/verdicts/999999.json" 2>/dev/null && fail "the user could add a verdict"
  as_user cat "$KEY" >/dev/null 2>&1 && fail "the user could read the key"
  # Root edits the verdict: the signature check must fail.
  "$PILOT" verdict --policy "$POLICY" "$job" >/dev/null || fail "untouched verdict not valid"
  python3 - "$v" <<'PY'
import json, sys
p = sys.argv[1]
d = json.load(open(p))
d["decision"] = "NO-GO" if d["decision"] == "GO" else "GO"
json.dump(d, open(p, "w"), indent=2, sort_keys=True)
PY
  local out rc=0
  out=$("$PILOT" verdict --policy "$POLICY" "$job" 2>&1) || rc=$?
  ((rc == 1)) || fail "edited verdict: exit $rc: $out"
  grep -q "signature INVALID" <<<"$out" || fail "edited verdict not flagged: $out"
  note "edited verdict: $(grep INVALID <<<"$out" | head -n1)"
}

# The node stage launched as srun steps inside the job: `sbatch --ntasks=2`
# with parallel.launcher = "srun" (two ranks over Gloo on the CPU, then the
# restores at 2 and 1 processes). The ranks must come from the tasks of srun
# (their rank variables are SLURM_PROCID/SLURM_NTASKS) and the verdict's node
# check must pass.
case_node_srun() {
  local cfg job
  cfg=$(user_config node-srun.toml 's/^launcher = "local"/launcher = "srun"/')
  grep -q '^launcher = "srun"' "$cfg" || fail "could not set parallel.launcher in $cfg"
  job=$(submit_wait --ntasks=2 --pilot="$cfg" --pilot-stage=all)
  wait_verdict "$job"
  [[ $(decision "$job") == GO ]] || fail "job $job: $(decision "$job"): $(verdict_text "$job")"
  [[ $(check_named "$job" node_restore) == pass ]] ||
    fail "node_restore: $(check_named "$job" node_restore): $(verdict_text "$job")"
  [[ $(check_named "$job" node_stage) == absent ]] || fail "node_stage: $(verdict_text "$job")"
  local work=$STATE/jobs/$job/work res
  res=$STATE/jobs/$job/results.json
  [[ -f $res ]] || fail "no $res"
  local got
  got=$(json "$res" '" ".join(str(x) for x in [d["stages"]["node"]["status"], d["stages"]["node"]["launcher"], d["stages"]["node"]["world_size"], sorted(r["rank"] for r in d["stages"]["node"]["ranks"]), [r["world_size"] for r in d["stages"]["node"]["restore"]]])')
  [[ $got == "ok srun 2 [0, 1] [2, 1]" ]] || fail "stages.node: $got (want ok srun 2 [0, 1] [2, 1])"
  # Each rank's own report: started by srun as task R of 2.
  local r rep
  for r in 0 1; do
    rep=$work/node/train/rank-0000$r.json
    [[ -f $rep ]] || fail "no $rep"
    got=$(json "$rep" '" ".join(str(d[k]) for k in ("rank", "world_size", "launcher", "status", "backend"))')
    [[ $got == "$r 2 srun ok gloo" ]] || fail "rank $r report: $got"
  done
  note "node stage under srun: job $job GO; $(check_named "$job" node_restore) node_restore; ranks from srun tasks"
}

# `local-slurm up` refuses, before starting a daemon, a cluster folder the
# test user cannot enter, naming the file and the folder that blocks it.
case_preflight() {
  local priv=$TMP/private out rc=0 started
  install -d -m 0700 "$priv"   # as a checkout in /root or a mktemp -d folder
  started=$SECONDS
  out=$(PILOT_CLUSTER_DIR=$priv/cluster PILOT_JOB_USER=$TEST_USER PILOT_UP_TIMEOUT=5 \
          PILOT_SLURMCTLD_PORT=16827 PILOT_SLURMD_PORT=16828 \
          "$SRC/scripts/local-slurm" up "$BUILD" 2>&1) || rc=$?
  local daemons
  daemons=$(ls "$priv/cluster/run" 2>/dev/null || true)
  PILOT_CLUSTER_DIR=$priv/cluster "$SRC/scripts/local-slurm" down >/dev/null 2>&1 || true
  ((rc != 0)) || fail "up accepted a cluster folder $TEST_USER cannot enter: $out"
  [[ -z $daemons ]] || fail "up started daemons before its check: $daemons"
  ((SECONDS - started < 30)) || fail "up took $((SECONDS - started)) s to refuse"
  local want="pilot: local-slurm: $TEST_USER cannot read $priv/cluster/etc/slurm.conf: $priv blocks it (mode 700, owner root)"
  grep -qF "$want" <<<"$out" || fail "no '$want' in: $out"
  grep -qF "cannot execute $priv/cluster/bin/pilot-runner: $priv blocks it" <<<"$out" ||
    fail "the runner is not named: $out"
  grep -q "^pilot: local-slurm: hint: " <<<"$out" || fail "no hint: $out"
  note "refused: $(head -n1 <<<"$out")"
}

# Nothing the cluster configures, and no library its programs load, lies in
# the checkout or the build (which may be private). Stricter than a run from
# a public checkout, where such a path would go unnoticed.
case_staged_paths() {
  local f p bad=()
  for f in "$CLUSTER"/etc/{slurm.conf,plugstack.conf,pilot.conf,prolog.sh,epilog.sh}; do
    [[ -f $f ]] || fail "no $f"
    while read -r p; do
      case $p/ in "$SRC"/*|"$BUILD"/*) bad+=("$f: $p") ;; esac
    done < <(grep -v '^#' "$f" | grep -o '/[^[:space:]"=(),]*' || true)
  done
  for f in "$CLUSTER"/bin/*; do
    while read -r p; do
      case $p in "$SRC"/*|"$BUILD"/*) bad+=("$f loads $p") ;; esac
    done < <(ldd "$f" 2>/dev/null | awk '$2 == "=>" {print $3}')
  done
  ((${#bad[@]} == 0)) || fail "paths into the checkout or build: ${bad[*]}"
  case $CLUSTER/ in "$SRC"/*|"$BUILD"/*) fail "the cluster is in the checkout: $CLUSTER" ;; esac
  note "configs and programs of $CLUSTER point outside $SRC and $BUILD"
}

run_case "$@"
