#!/usr/bin/env bash
# A cluster of two nodes on this machine (scripts/local-slurm up --nodes 2):
# each slurmd in a network namespace of its own, a job's tasks on both with
# their own node names and addresses, and `down` leaving no namespace or
# link behind. A cluster of its own (folder, ports), beside the two the
# other `slurm` tests share. Exit 77 (CTest: skipped) where network
# namespaces cannot be made.
#
# pilots: `sbatch -N2 --ntasks-per-node=2 --pilot=…` with the srun launcher,
# DDP and sharded: four ranks over Gloo on two nodes, rendezvous at the
# first node's address over the namespaces' network, restores at 4 and 2
# ranks; the verdict from the first node's epilog only, which holds the
# second node's prolog record against the lock (nodes_pinned) and keeps it
# in the job's folder; both nodes idle.
#
# rank_killed: the same DDP pilot, and rank 2 (on pn2) killed with SIGKILL
# during the node stage's training: NO-GO naming rank 2 and pn2, within a
# bounded time of the kill, both nodes idle.
#
# program: the user's own program (tests/program/tiny.py) across both nodes:
# four ranks through one srun step with torchrun's variables from srun's,
# rendezvous at the first node's address, records over srun's labelled
# output: GO, the ranks on pn1 and pn2, pn2's slurmd launched tasks of it;
# then rank 2 killed on pn2 in a long node stage: NO-GO naming both.
#
# work_not_shared: the job's folders hidden from pn2 (a tmpfs over the state
# directory's jobs/ in pn2's slurmd's mount namespace): the node stage ends
# before its ranks start, NO-GO naming pn2 and the work folder; both idle.
#
# slurmd_stopped: pn2's slurmd stopped during the node stage: slurmctld
# takes pn2 down after SlurmdTimeout and ends the job; the first node's
# epilog makes a NO-GO saying the pilot was ended, pn1 is idle, and pn2
# returns when its slurmd does (nothing of ours drained either).
#
# container: the program of the container cases (tests/slurm/container/
# loss.sh) in an image pushed to a registry on the cluster's bridge, four
# ranks over both nodes through one srun step, each task handed by the
# plugin on its own node to root's `pilot-supervisor --container-task` and
# run by podman by digest as the user: GO, the pinned digest read back, the
# ranks on pn1 and on pn2 saw the image's own file and none of the node's
# folders, pn2's prolog pinned the same digest; both nodes idle.
#
# bound_run: a program pilot of tiny.py on both nodes, granted for two
# nodes; `pilot run` runs the pinned tiny.py as the long run on four ranks
# over both nodes through the pilot's own srun launch: COMPLETED, every rank
# trained to run.target_steps, pn2's slurmd launched its step; both idle.
#
#   multinode.sh cluster|pilots|rank_killed|program|work_not_shared|slurmd_stopped|container|bound_run
#                                                   (environment as for e2e.sh)
set -euo pipefail
SRC=${PILOT_SOURCE_DIR:?}
BUILD=${PILOT_BUILD_DIR:?}
TEST_USER=${PILOT_TEST_USER:-pilotuser}
export PILOT_CLUSTER_DIR=${PILOT_CLUSTER_DIR:?}-mn
export PILOT_SLURMCTLD_PORT=${PILOT_MN_SLURMCTLD_PORT:-16827} PILOT_SLURMD_PORT=${PILOT_MN_SLURMD_PORT:-16828}
export SLURM_CONF=$PILOT_CLUSTER_DIR/etc/slurm.conf
LOCAL_SLURM=$SRC/scripts/local-slurm

fail() { echo "FAIL: $*" >&2; exit 1; }
# The unprivileged user jobs run as (tests/slurm/users.sh).
# shellcheck source=tests/slurm/users.sh
source "$SRC/tests/slurm/users.sh"
# The cluster's logs, kept in the build for a failed run to be read.
keep_logs() {
  [[ -d $PILOT_CLUSTER_DIR/log ]] || return 0
  rm -rf "$BUILD/slurm-multinode-log"
  cp -r "$PILOT_CLUSTER_DIR/log" "$BUILD/slurm-multinode-log"
}
note() { echo "-- $*" >&2; }

# Two nodes up (skips, 77, where no network namespace can be made); `down`
# on exit, after keeping the logs.
start_two_nodes() {
  if ! ip netns add pilot-probe-$$ 2>/dev/null; then
    echo "SKIP: cannot make a network namespace here"
    exit 77
  fi
  ip netns del pilot-probe-$$
  ensure_user "$TEST_USER" || fail "cannot make the user $TEST_USER"
  trap 'keep_logs; "$LOCAL_SLURM" down --purge >/dev/null 2>&1 || true' EXIT
  "$LOCAL_SLURM" down --purge >/dev/null 2>&1 || true
  PILOT_JOB_USER=$TEST_USER "$LOCAL_SLURM" up --nodes 2 "$BUILD" >/dev/null
}

case_cluster() {
  start_two_nodes
  local ours
  ours=$(sed -n 's/^netns //p' "$PILOT_CLUSTER_DIR/run/net.list" | sort | paste -sd' ')
  [[ $(wc -w <<<"$ours") == 2 ]] || fail "expected two namespaces, net.list says: $ours"
  "$LOCAL_SLURM" status | grep -c '^node pn[12] idle$' | grep -qx 2 || fail "status: $("$LOCAL_SLURM" status)"

  # One task on each node: its node's name, id and own address.
  local out
  out=$(cd /tmp && timeout 60 runuser -u "$TEST_USER" -- env SLURM_CONF="$SLURM_CONF" \
          srun -N2 -n2 --ntasks-per-node=1 sh -c \
          'echo "$SLURM_PROCID $SLURMD_NODENAME $SLURM_NODEID $(ip -4 -o addr show dev eth0 | awk "{print \$4}")"' |
          sort) || fail "srun across two nodes: $out"
  note "$out"
  local a b
  a=$(sed -n 1p <<<"$out") b=$(sed -n 2p <<<"$out")
  [[ $a =~ ^0\ pn1\ 0\ ([0-9.]+)/24$ ]] || fail "task 0: $a"
  local addr0=${BASH_REMATCH[1]}
  [[ $b =~ ^1\ pn2\ 1\ ([0-9.]+)/24$ ]] || fail "task 1: $b"
  [[ ${BASH_REMATCH[1]} != "$addr0" ]] || fail "both tasks report $addr0"
  # A task on pn2 reaches pn1's slurmd over the namespaces' network, and
  # nothing listens on that port at its own loopback.
  out=$(cd /tmp && timeout 60 runuser -u "$TEST_USER" -- env SLURM_CONF="$SLURM_CONF" \
          srun -N1 -w pn2 bash -c "timeout 5 bash -c '</dev/tcp/$addr0/$PILOT_SLURMD_PORT' && echo reached;
                                   timeout 5 bash -c '</dev/tcp/127.0.0.1/$PILOT_SLURMCTLD_PORT' 2>/dev/null && echo loopback") || true
  [[ $out == reached ]] || fail "from pn2 to pn1's slurmd at $addr0:$PILOT_SLURMD_PORT: '$out'"

  "$LOCAL_SLURM" down --purge >/dev/null
  trap - EXIT
  local ns
  for ns in $ours; do
    ! ip netns list | grep -q "^$ns\b" || fail "down left the namespace $ns"
  done
  ! ip -o link | grep -q "pb$(printf '%s' "$PILOT_CLUSTER_DIR" | sha256sum | cut -c1-6)" ||
    fail "down left the bridge"
  note "cluster: two nodes up, a task on each with its own address, nothing left after down"
}

# For a failure: each program process of JOB, with its last lines.
program_tails() {  # program_tails JOB
  local res=$STATE/jobs/$1/results.json
  [[ -f $res ]] || return 0
  printf '\n-- processes:\n'
  json "$res" '"\n".join("%s %s rank %s exit %s records %s wall %s s:\n%s" % (p.get("stage"), p.get("process"), p.get("rank"), p.get("exit_code"), p.get("records"), p.get("wall_seconds"), p.get("stderr_tail")) for p in d.get("program", {}).get("processes", []))' || true
}

# A two-node cluster for a pilot case, and lib.sh's helpers over it.
up_two_nodes() {
  start_two_nodes
  # shellcheck source=tests/slurm/lib.sh
  source "$SRC/tests/slurm/lib.sh"
  trap 'cleanup; keep_logs; "$LOCAL_SLURM" down --purge >/dev/null 2>&1 || true' EXIT
}

# The tiny config as a pilot of 2 nodes x 2 ranks over srun: mn_config MODE [SED...]
mn_config() {
  local mode=$1 cfg
  shift
  cfg=$(user_config "mn-$mode.toml" 's/^launcher = "local"/launcher = "srun"/' \
          "s/^mode = \"ddp\"/mode = \"$mode\"/" 's/^nproc = 2/nproc = 4/' 's/^nodes = 1 *$/nodes = 2/' "$@")
  grep -q "^mode = \"$mode\"" "$cfg" && grep -q '^nproc = 4' "$cfg" && grep -q '^nodes = 2' "$cfg" ||
    fail "could not edit $cfg"
  echo "$cfg"
}

nodes_idle() {  # nodes_idle WHAT
  local got
  got=$(sinfo -h -N -o '%N %t' | sort | paste -sd' ')
  [[ $got == "pn1 idle pn2 idle" ]] || fail "$1: nodes: $got"
}

case_pilots() {
  up_two_nodes
  local mode cfg job res got t0
  for mode in ddp sharded; do
    cfg=$(mn_config "$mode")
    t0=$SECONDS
    job=$(submit_wait -N2 --ntasks-per-node=2 --pilot="$cfg" --pilot-stage=all)
    wait_verdict "$job"
    [[ $(decision "$job") == GO ]] || fail "$mode: job $job: $(decision "$job"): $(verdict_text "$job")"
    res=$STATE/jobs/$job/results.json
    got=$(json "$res" '" ".join(str(x) for x in [d["stages"]["node"]["status"], d["stages"]["node"]["launcher"], d["stages"]["node"]["mode"], d["stages"]["node"]["world_size"], sorted(set(r["host"] for r in d["stages"]["node"]["ranks"])), [r["world_size"] for r in d["stages"]["node"]["restore"]]])')
    [[ $got == "ok srun $mode 4 ['pn1', 'pn2'] [4, 2]" ]] ||
      fail "$mode: stages.node: $got (want ok srun $mode 4 ['pn1', 'pn2'] [4, 2])"
    # Two ranks on each node, as srun placed them.
    got=$(json "$res" '" ".join(str(r["rank"]) + ":" + r["host"] for r in sorted(d["stages"]["node"]["ranks"], key=lambda r: r["rank"]))')
    [[ $got == "0:pn1 1:pn1 2:pn2 3:pn2" ]] || fail "$mode: ranks: $got"
    # One all-reduce on each level: within each node (2 ranks, 2 nodes at
    # once) and between them (2 groups of one rank per node).
    got=$(json "$res" '" ".join(str(x) for x in [d["stages"]["node"]["comm"]["nodes"]] + [(l["group_size"], l["groups"], l["allreduce_ms"] > 0) for l in (d["stages"]["node"]["comm"]["intra_node"], d["stages"]["node"]["comm"]["inter_node"])])')
    [[ $got == "2 (2, 2, True) (2, 2, True)" ]] || fail "$mode: stages.node.comm levels: $got"
    [[ $(check_named "$job" node_levels) == skip ]] || fail "$mode: node_levels: $(verdict_text "$job")"
    got=$(json "$STATE/verdicts/$job.json" 'd["job"]["id"]')
    [[ $got == "$job" ]] || fail "$mode: the verdict names job $got"
    # The second node's epilog made no verdict of its own; its prolog's
    # record moved into the job's folder.
    local i
    for ((i = 0; i < 50; i++)); do [[ -e $STATE/nodes/$job ]] || break; sleep 0.2; done
    [[ ! -e $STATE/nodes/$job ]] || fail "$mode: $STATE/nodes/$job is still there: $(ls "$STATE/nodes/$job")"
    # pn2's pins, kept beside the lock and held against it.
    got=$(json "$STATE/jobs/$job/nodes/pn2.json" 'd["job"]["host"] + " " + str(d["job"]["id"])')
    [[ $got == "pn2 $job" ]] || fail "$mode: jobs/$job/nodes/pn2.json: $got"
    [[ $(check_named "$job" nodes_pinned) == pass ]] || fail "$mode: nodes_pinned: $(check_detail "$job" nodes_pinned)"
    grep -q "job $job: node pn2: the pilot ran on the job's first node, pn1" "$CLUSTER/log/pilot-epilog.log" ||
      fail "$mode: no log line of pn2's epilog for job $job"
    nodes_idle "$mode: after job $job"
    note "$mode: job $job GO in $((SECONDS - t0)) s: 4 ranks on pn1 and pn2, restores at 4 and 2"
  done
}

# The pid of the first process whose command line matches PATTERN and whose
# environment has a line matching each LINE ("" while there is none): read
# from each process's environment (root).
env_pid() {  # env_pid PATTERN LINE...
  local p env line pattern=$1 ok
  shift
  for p in $(pgrep -f "$pattern" || true); do
    env=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null) || continue
    ok=1
    for line in "$@"; do grep -qx "$line" <<<"$env" || { ok=0; break; }; done
    ((ok)) && { echo "$p"; return 0; }
  done
  return 0
}

# The pid of rank R's pilot-runner in the node stage's train phase on NODE.
train_rank_pid() {  # train_rank_pid NODE R
  env_pid 'pilot-runner run' "SLURMD_NODENAME=$1" "SLURM_PROCID=$2" 'PILOT_NODE_DIR=.*/node/train'
}

# Submits a node-stage-only DDP pilot of STEPS steps over 2 x 2 ranks and
# waits for rank 2 on pn2 to train: sets JOB and PID.
submit_and_find_rank2() {  # submit_and_find_rank2 STEPS
  local cfg out i
  cfg=$(mn_config ddp "s/^steps = 12/steps = $1/" 's/^at_step = 6/at_step = 3/')
  out=$(as_user sbatch --parsable -o "$TMP/slurm-%j.out" -N2 --ntasks-per-node=2 --pilot="$cfg" \
          --pilot-stage=node --wrap true)
  JOB=${out%%;*}
  [[ $JOB =~ ^[0-9]+$ ]] || fail "sbatch: $out"
  PID=""
  for ((i = 0; i < 600; i++)); do
    PID=$(train_rank_pid pn2 2)
    [[ -z $PID ]] || return 0
    sleep 0.5
  done
  fail "job $JOB: no rank 2 on pn2 in the train phase within 300 s: $(squeue -h -j "$JOB" -o %T)" \
       "$(tail -n 5 "$TMP/slurm-$JOB.out" 2>/dev/null)"
}

case_rank_killed() {
  up_two_nodes
  local JOB PID t_kill
  # A train phase long enough to be caught in.
  submit_and_find_rank2 2000
  local job=$JOB
  sleep 2  # into its steps
  kill -9 "$PID"
  t_kill=$SECONDS
  wait_verdict "$job" 120
  local took=$((SECONDS - t_kill))
  [[ $(decision "$job") == NO-GO ]] || fail "job $job: $(decision "$job") after rank 2 was killed"
  local detail
  detail=$(check_detail "$job" node_stage)
  [[ $detail == "rank 2 on pn2 failed (srun: Killed)"* ]] || fail "job $job: node_stage: $detail"
  ((took <= 60)) || fail "job $job: the verdict came $took s after the kill"
  nodes_idle "after job $job"
  note "rank_killed: job $job NO-GO $took s after the kill: $detail"
}

# tiny.py's config for 4 ranks over the 2 nodes, STEPS steps:
# mn_program_config DIR STEPS. The restore is compared within
# eval.restore_tolerance: at four CPU ranks a resumed process's loss can
# differ from the reference's in its last bit now and then (the same
# happens with the four ranks on one machine). Four ranks import torch at
# once on two cores beside the other cluster's jobs: a first record can
# take a minute, so the hang limit is 150 s.
mn_program_config() {  # mn_program_config DIR STEPS [COMMAND_TOML]
  program_toml "$1/mn.toml" mn-program "$1" 4 "${3:-[\"python3\", \"tiny.py\"]}" 'step_timeout = 150'
  sed -i -e 's/^gpus_per_node = 2$/gpus_per_node = 2\nnodes = 2/' -e "s/^steps = 10$/steps = $2/" \
    -e 's/^deterministic = true$/deterministic = false/' "$1/mn.toml"
  grep -q '^nodes = 2' "$1/mn.toml" && grep -q "^steps = $2\$" "$1/mn.toml" || fail "could not edit $1/mn.toml"
  echo "$1/mn.toml"
}

# The pid of the program's rank R on NODE in the node stage.
program_rank_pid() {  # program_rank_pid NODE R
  env_pid tiny.py "SLURMD_NODENAME=$1" "RANK=$2" 'PILOT_STAGE=node'
}

case_program() {
  up_two_nodes
  local dir cfg job res got t0 out pid i
  dir=$(user_copy "$SRC/tests/program" mn-program)
  cfg=$(mn_program_config "$dir" 10)
  t0=$SECONDS
  # The namespaces' host name is the machine's: Gloo is told the interface.
  job=$(submit_wait --export=ALL,GLOO_SOCKET_IFNAME=eth0 -N2 --ntasks-per-node=2 --pilot="$cfg")
  wait_verdict "$job"
  [[ $(decision "$job") == GO ]] || fail "job $job: $(decision "$job"): $(verdict_text "$job")$(program_tails "$job")"
  res=$STATE/jobs/$job/results.json
  got=$(json "$res" '" ".join(str(x) for x in [d["stages"]["node"]["status"], d["stages"]["node"]["launcher"], d["stages"]["node"]["world_size"], d["stages"]["node"]["comm"]["nodes"], [str(r["rank"]) + ":" + r["host"] for r in d["stages"]["node"]["ranks"]], [(r["world_size"], r["equal"]) for r in d["stages"]["node"]["restore"]]])')
  [[ $got == "ok srun 4 2 ['0:pn1', '1:pn1', '2:pn2', '3:pn2'] [(4, True)]" ]] || fail "job $job: stages.node: $got"
  # One srun step per node phase: 4 ranks x 10 steps, then 4 x 5 resumed;
  # and pn2's slurmd launched tasks of the job's steps.
  got=$(json "$res" 'str([(p["process"], p["records"]) for p in d["program"]["processes"] if p["stage"] == "node"])')
  [[ $got == "[('reference', 40), ('resumed', 20)]" ]] || fail "job $job: node processes: $got"
  grep -q "StepId=$job\.[0-9]" "$CLUSTER/log/slurmd-pn2.log" || fail "job $job: pn2's slurmd log names no step of it"
  got=$(json "$STATE/verdicts/$job.json" '[c["status"] + ": " + c["measured"] for c in d["checks"] if c["name"] == "node_restore"][0]')
  [[ $got == "pass: 4 procs program on 2 nodes: 4->4 equal" ]] || fail "job $job: node_restore: $got"
  nodes_idle "after program job $job"
  note "program: job $job GO in $((SECONDS - t0)) s: 4 ranks of tiny.py on pn1 and pn2 through srun"

  # Rank 2 killed on pn2 a few steps into the node stage: the verdict names
  # it, its node and the last step it reported.
  cfg=$(mn_program_config "$dir" 200000 "[\"python3\", \"tiny.py\", \"--progress\", \"$dir/progress\"]")
  out=$(as_user sbatch --parsable -o "$TMP/slurm-%j.out" --export=ALL,GLOO_SOCKET_IFNAME=eth0 -N2 \
          --ntasks-per-node=2 --pilot="$cfg" --pilot-stage=node --wrap true)
  job=${out%%;*}
  [[ $job =~ ^[0-9]+$ ]] || fail "sbatch: $out"
  pid=""
  for ((i = 0; i < 600 && ${#pid} == 0; i++)); do pid=$(program_rank_pid pn2 2); [[ -n $pid ]] || sleep 0.5; done
  [[ -n $pid ]] || fail "job $job: no rank 2 of tiny.py on pn2 within 300 s"
  # Into its steps: its third written (the records before it reached the
  # supervisor through srun meanwhile).
  for ((i = 0; i < 600; i++)); do
    [[ $(cat "$dir/progress.2" 2>/dev/null || echo 0) -ge 3 ]] && break
    sleep 0.5
  done
  [[ $(cat "$dir/progress.2" 2>/dev/null || echo 0) -ge 3 ]] || fail "job $job: rank 2 wrote no third step within 300 s"
  kill -9 "$pid"
  t0=$SECONDS
  wait_verdict "$job" 120
  [[ $(decision "$job") == NO-GO ]] || fail "job $job: $(decision "$job") after rank 2 was killed"
  got=$(check_detail "$job" node_stage)
  [[ $got == "rank 2 on pn2 of the program failed (srun: Killed) after step "* ]] || fail "job $job: node_stage: $got"
  nodes_idle "after program job $job"
  note "program: job $job NO-GO $((SECONDS - t0)) s after the kill: $got"
}

case_container() {
  up_two_nodes
  command -v podman >/dev/null || fail "podman is not installed (scripts/setup)"
  local bridge addr dir digest job res got t0
  bridge=pb$(printf '%s' "$PILOT_CLUSTER_DIR" | sha256sum | cut -c1-6)
  addr=$(ip -o -4 addr show dev "$bridge" | awk '{print $4}' | cut -d/ -f1)
  [[ -n $addr ]] || fail "no address on the bridge $bridge"
  PORT=${PILOT_MN_REGISTRY_PORT:-5001}
  REG=$addr:$PORT
  ROOTDIR=$(mktemp -d /tmp/pilot-ctr.XXXXXX)
  # shellcheck source=tests/slurm/image_lib.sh
  source "$SRC/tests/slurm/image_lib.sh"
  trap 'image_cleanup; cleanup; keep_logs; "$LOCAL_SLURM" down --purge >/dev/null 2>&1 || true' EXIT
  start_registry
  digest=$(push_image pilot/mn:v1)
  [[ $digest == sha256:* ]] || fail "no digest from the registry: $digest"
  allow_podman
  sed -i "s|^insecure = \[|insecure = [\"$REG\", |" "$POLICY"
  dir=$(user_copy "$SRC/tests/slurm/container" mn-ctr)
  program_toml "$dir/mn.toml" mn-ctr "$dir" 4 "[\"/bin/sh\", \"$dir/loss.sh\"]" \
    'loss_pattern = "loss=([0-9.]+)"' "[container]" "image = \"$REG/pilot/mn:v1\"" 'runtime = "podman"'
  sed -i 's/^gpus_per_node = 2$/gpus_per_node = 2\nnodes = 2/' "$dir/mn.toml"
  t0=$SECONDS
  job=$(submit_wait -N2 --ntasks-per-node=2 --pilot="$dir/mn.toml")
  wait_verdict "$job"
  res=$STATE/jobs/$job/results.json
  [[ $(decision "$job") == GO ]] || fail "job $job: $(decision "$job"): $(verdict_text "$job")$(program_tails "$job")"
  [[ $(json "$res" 'd["program"]["container"]["digest"]') == "$digest" ]] ||
    fail "job $job: digest read back: $(json "$res" 'd["program"].get("container")')"
  got=$(json "$res" '" ".join(str(x) for x in [d["stages"]["node"]["launcher"], [str(r["rank"]) + ":" + r["host"] for r in d["stages"]["node"]["ranks"]]])')
  [[ $got == "srun ['0:pn1', '1:pn1', '2:pn2', '3:pn2']" ]] || fail "job $job: stages.node: $got"
  # Each rank said, from inside, that it saw the image's own file and the
  # image's root folder (no /usr: the node's stays outside).
  got=$(json "$res" '"\n".join(p["stderr_tail"] for p in d["program"]["processes"] if p["stage"] == "node")')
  local rank
  for rank in 0 1 2 3; do
    grep -Eq "^ *$rank: inside-the-image\$" <<<"$got" || fail "job $job: rank $rank did not see the image: $got"
    grep -Eq "^ *$rank: root: bin " <<<"$got" && ! grep -Eq "^ *$rank: root: .* usr " <<<"$got" ||
      fail "job $job: rank $rank saw the node's root folder: $got"
  done
  [[ $(json "$STATE/jobs/$job/nodes/pn2.json" 'd["container"]["digest"]') == "$digest" ]] ||
    fail "job $job: pn2's record: $(json "$STATE/jobs/$job/nodes/pn2.json" 'd["container"]')"
  nodes_idle "after container job $job"
  note "container: job $job GO in $((SECONDS - t0)) s: 4 ranks on pn1 and pn2 in $digest"

  # Cancelled while its ranks run in the image on both nodes (each waits
  # for a file that never comes): no container is left on either node.
  program_toml "$dir/cancel.toml" mn-ctr "$dir" 4 "[\"/bin/sh\", \"$dir/loss.sh\"]" \
    'loss_pattern = "loss=([0-9.]+)"' "env = { WAIT_FOR = \"$dir/never\" }" "[container]" \
    "image = \"$REG/pilot/mn:v1\"" 'runtime = "podman"'
  sed -i 's/^gpus_per_node = 2$/gpus_per_node = 2\nnodes = 2/' "$dir/cancel.toml"
  job=$(as_user sbatch --parsable -o "$TMP/slurm-%j.out" -N2 --ntasks-per-node=2 \
    --pilot="$dir/cancel.toml" --pilot-stage=node --wrap true)
  local i running=0 pods=(env CONTAINERS_CONF="$ROOTDIR/containers.conf" podman --root "$ROOTDIR/cache")
  for ((i = 0; i < 240 && running < 4; i++)); do
    running=$("${pods[@]}" ps -q --filter "name=^pilot-$job-" 2>/dev/null | wc -l)
    sleep 0.25
  done
  [[ $running -ge 4 ]] || fail "job $job: $running of its 4 ranks' containers ran"
  scancel "$job"
  wait_job "$job"
  got=$("${pods[@]}" ps -a --filter "name=^pilot-$job-" --format '{{.Names}} {{.Status}}' 2>&1)
  [[ -z $got ]] || fail "job $job cancelled: containers left: $got; the job said: $(tail -n 8 "$TMP/slurm-$job.out" 2>&1)"
  nodes_idle "after container job $job was cancelled"
  note "container: job $job cancelled while 4 ranks ran in the image: none left, nodes idle"
}

case_work_not_shared() {
  up_two_nodes
  local cfg job got t0 pid
  pid=$(cat "$CLUSTER/run/slurmd-pn2.pid")
  install -d -m 0755 "$STATE/jobs"
  nsenter -t "$pid" -m mount -t tmpfs -o mode=0755 pilot-hidden "$STATE/jobs" ||
    fail "cannot hide $STATE/jobs from pn2"
  cfg=$(mn_config ddp)
  t0=$SECONDS
  job=$(submit_wait -N2 --ntasks-per-node=2 --pilot="$cfg" --pilot-stage=node)
  wait_verdict "$job"
  nsenter -t "$pid" -m umount "$STATE/jobs" || true
  [[ $(decision "$job") == NO-GO ]] || fail "job $job: $(decision "$job") without its work folder on pn2"
  got=$(check_detail "$job" node_stage)
  [[ $got == "the work folder $STATE/jobs/$job/work is not a folder the job's user can write on pn2: "* ]] ||
    fail "job $job: node_stage: $got"
  nodes_idle "after job $job"
  note "work_not_shared: job $job NO-GO in $((SECONDS - t0)) s: $got"
}

case_slurmd_stopped() {
  up_two_nodes
  local JOB PID i t_stop
  # Training that outlasts SlurmdTimeout.
  submit_and_find_rank2 1000000
  local job=$JOB
  kill "$(cat "$CLUSTER/run/slurmd-pn2.pid")"
  t_stop=$SECONDS
  wait_verdict "$job" 240
  local took=$((SECONDS - t_stop))
  [[ $(decision "$job") == NO-GO ]] || fail "job $job: $(decision "$job") after pn2's slurmd stopped"
  local detail
  detail=$(check_detail "$job" completed)
  [[ $detail == *"Slurm had its node pn2 (Not responding) down"* || $detail == *"Slurm has the job's node pn2 (Not responding) down"* ]] ||
    fail "job $job: completed: $detail"
  # Slurm requeues a job whose node failed: this test ends it.
  scancel "$job" 2>/dev/null || true
  local states
  states=$(sinfo -h -N -o '%N %t' | sort | paste -sd' ')
  [[ $states == "pn1 idle pn2 down"* ]] || fail "after pn2's slurmd stopped: $states (want pn1 idle, pn2 down)"
  "$LOCAL_SLURM" restart slurmd >/dev/null
  for ((i = 0; i < 60; i++)); do
    states=$(sinfo -h -N -o '%N %t' | sort | paste -sd' ')
    [[ $states == "pn1 idle pn2 idle" ]] && break
    sleep 1
  done
  [[ $states == "pn1 idle pn2 idle" ]] || fail "pn2 did not return with its slurmd: $states"
  note "slurmd_stopped: job $job NO-GO $took s after the stop: $detail; pn2 back when its slurmd was"
}

case_bound_run() {
  up_two_nodes
  local dir cfg job run out got t0=$SECONDS
  grep -q '^JobSubmitPlugins=lua' "$SLURM_CONF" || fail "the cluster runs no job_submit.lua"
  dir=$(user_copy "$SRC/tests/program" mn-bound)
  # 0.3 CPU-s a step: root measures its work (busy), which a grant needs.
  cfg=$(mn_program_config "$dir" 10 '["python3", "tiny.py", "--step-cpu", "0.3"]')
  sed -i -e 's/^gpus_per_node = 2$/&\npreprocess_hours = 240/' \
    -e 's/^target_steps = 1000$/target_steps = 12\ncheckpoint_interval = 6/' "$cfg"
  job=$(submit_wait --export=ALL,GLOO_SOCKET_IFNAME=eth0 -N2 --ntasks-per-node=2 --pilot="$cfg")
  wait_verdict "$job"
  [[ $(decision "$job") == GO ]] || fail "job $job: $(decision "$job"): $(verdict_text "$job")$(program_tails "$job")"
  out=$("$PILOT" grant --policy "$POLICY" "$job" --nodes 2 --duration 10-00:00:00 2>&1) || fail "pilot grant $job: $out"
  note "bound_run: pilot $job GO on pn1 and pn2, granted two nodes ($((SECONDS - t0)) s)"
  run=$(as_user "$PILOT" run "$job" -- --parsable -o "$TMP/run-%j.out" --export=ALL,GLOO_SOCKET_IFNAME=eth0 \
    -N2 --ntasks-per-node=2 --time=10-0) || fail "pilot run $job: $run"
  run=${run%%$'\n'*}
  [[ $run =~ ^[0-9]+$ ]] || fail "pilot run $job: $run"
  wait_job "$run"
  out=$(cat "$TMP/run-$run.out")
  [[ $(scontrol show job "$run" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p') == COMPLETED ]] || fail "job $run: $out"
  grep -qF "pilot: job $run: the run of pilot $job (mn-program): 4 ranks on pn1,pn2 through srun of python3 tiny.py --step-cpu 0.3 in $dir, 12 steps" <<<"$out" ||
    fail "job $run: not the pilot's launch: $out"
  grep -q "pilot: job $run: the run ended: every process exited 0" <<<"$out" || fail "job $run: $out"
  # Every rank's last step, as srun labels its lines.
  got=$(sed -n 's/^ *\([0-3]\): step 12 loss .*/\1/p' <<<"$out" | sort | paste -sd,)
  [[ $got == "0,1,2,3" ]] || fail "job $run: the ranks that reached step 12: '$got': $out"
  [[ -f $TMP/pilot-run-$run/checkpoints/ckpt.pt ]] || fail "job $run: no checkpoint in its folder"
  grep -q "StepId=$run\.[0-9]" "$CLUSTER/log/slurmd-pn2.log" || fail "job $run: pn2's slurmd log names no step of it"
  [[ $(json "$STATE/runs/$run.json" 'd["decision"]') == admitted ]] || fail "run record: $(cat "$STATE/runs/$run.json")"
  scontrol delete reservation "pilot_$job" >/dev/null
  sleep 1
  nodes_idle "after the bound run $run"
  note "bound_run: job $run COMPLETED, 4 ranks of the pinned tiny.py on pn1 and pn2; took $((SECONDS - t0)) s"
}

[[ $# -eq 1 ]] && declare -F "case_$1" >/dev/null || { echo "usage: $(basename "$0") cluster|pilots|rank_killed|program|work_not_shared|slurmd_stopped|container|bound_run" >&2; exit 2; }
"case_$1"
echo "PASS: $1"
