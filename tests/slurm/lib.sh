# Shared set-up and helpers of the `slurm` test scripts (e2e.sh,
# evidence.sh): sourced, not run. Environment: PILOT_SOURCE_DIR,
# PILOT_BUILD_DIR, PILOT_CLUSTER_DIR, PILOT_TEST_USER (default pilotuser).
#
# The checkout may be private (mode 0700, as a clone in /root): whatever the
# test user submits or reads is a copy in $TMP, never a path of $SRC or $BUILD.
set -euo pipefail

SRC=${PILOT_SOURCE_DIR:?}
BUILD=${PILOT_BUILD_DIR:?}
CLUSTER=${PILOT_CLUSTER_DIR:?}
TEST_USER=${PILOT_TEST_USER:-pilotuser}
export SLURM_CONF=$CLUSTER/etc/slurm.conf
STATE=$CLUSTER/state
POLICY=$CLUSTER/etc/pilot.conf
KEY=$CLUSTER/etc/verdict.key
PILOT=$CLUSTER/bin/pilot   # the copy local-slurm made of $BUILD/cli/pilot
TINY_SRC=$SRC/configs/tiny-cpu.toml

TMP=$(mktemp -d /tmp/pilot-e2e.XXXXXX)
chmod 0755 "$TMP"
chown "$TEST_USER" "$TMP"
TINY=$TMP/tiny-cpu.toml   # the user's copy of the tiny config
install -m 0644 -o "$TEST_USER" "$TINY_SRC" "$TINY"
BACKGROUND=()
cleanup() {
  local pid
  for pid in "${BACKGROUND[@]}"; do kill "$pid" 2>/dev/null || true; done
  set_notify ""
  rm -rf "$TMP"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
note() { echo "-- $*" >&2; }

# Runs a command as the test user, in $TMP, with the cluster's environment.
as_user() {
  (cd "$TMP" && runuser -u "$TEST_USER" -- env SLURM_CONF="$SLURM_CONF" \
     PILOT_POLICY="$POLICY" PATH=/usr/local/bin:/usr/bin:/bin "$@")
}

# The user's copy of a folder of the source tree.
user_copy() {  # user_copy SRC_DIR NAME: prints the copy's path
  local dst=$TMP/$2
  cp -r "$1" "$dst"
  chown -R "$TEST_USER" "$dst"
  echo "$dst"
}

# A CPU pilot config of a program in the user's folder DIR: 10 steps,
# checkpoint at 5, bitwise restore; NPROC ranks; PROGRAM_LINES go into
# [program] after command and workdir.
program_toml() {  # program_toml FILE NAME DIR NPROC COMMAND_TOML [PROGRAM_LINE...]
  local file=$1 name=$2 dir=$3 nproc=$4 command=$5
  shift 5
  {
    printf '[run]\nname = "%s"\nseq_len = 16\nmicro_batch = 4\ntarget_steps = 1000\ngpus_per_node = 2\n' "$name"
    printf '[program]\ncommand = %s\nworkdir = "%s"\n' "$command" "$dir"
    printf '%s\n' "$@"
    printf '[training]\nsteps = 10\ndevice = "cpu"\ndeterministic = true\nwarmup_steps = 1\n'
    printf '[checkpoint]\nat_step = 5\n[parallel]\nnproc = %s\n' "$nproc"
  } >"$file"
  chown "$TEST_USER" "$file"
}

# A user-owned copy of the tiny config, edited by the given sed expressions.
user_config() {  # user_config NAME [SED_EXPR...]
  local f=$TMP/$1
  shift
  cp "$TINY_SRC" "$f"
  local e
  for e in "$@"; do sed -i "$e" "$f"; done
  chown "$TEST_USER" "$f"
  echo "$f"
}

json() {  # json FILE PYTHON_EXPR(d): prints the expression over the JSON
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

wait_for_file() {  # wait_for_file PATH SECONDS
  local i
  for ((i = 0; i < $2 * 5; i++)); do
    [[ -e $1 ]] && return 0
    sleep 0.2
  done
  fail "$1 did not appear within $2 s"
}

# The verdict file, which the epilog writes (and then posts).
wait_verdict() {  # wait_verdict JOB [SECONDS]
  wait_for_file "$STATE/verdicts/$1.json" "${2:-180}"
  sleep 0.3  # the rename is atomic; this lets the epilog finish posting
}

decision() { json "$STATE/verdicts/$1.json" 'd["decision"]'; }

# Runs the case named on the command line.
run_case() {  # run_case "$@"
  [[ $# -eq 1 ]] || { echo "usage: $(basename "$0") CASE" >&2; exit 2; }
  declare -F "case_$1" >/dev/null || { echo "$(basename "$0"): unknown case $1" >&2; exit 2; }
  "case_$1"
  echo "PASS: $1"
}

# Waits until job JOB has ended, its epilog included (squeue shows its final
# state, or no longer knows it), looking four times a second. (sbatch --wait
# looks after 2, 10, 42 s and every 32 s after that here, where MinJobAge is
# long: a job of 15 s kept each case waiting 27 s more.)
wait_job() {  # wait_job JOB [SECONDS]
  local i state="" err="$TMP/wait_job.$1.err"
  for ((i = 0; i < ${2:-900} * 4; i++)); do
    # squeue's stderr apart: a warning on a call that succeeded is no state.
    if ! state=$(squeue -h -j "$1" -t all -o %T 2>"$err"); then
      grep -q "Invalid job id" "$err" && return 0  # purged: long ended
      state="(squeue: $(head -c 300 "$err"))"  # slurmctld away for a moment: look again
    fi
    case $state in
      COMPLETED | CANCELLED | FAILED | TIMEOUT | NODE_FAIL | PREEMPTED | BOOT_FAIL | DEADLINE | OUT_OF_MEMORY | "")
        return 0 ;;
    esac
    sleep 0.25
  done
  fail "job $1 did not end within ${2:-900} s (state $state)"
}

# Submits with sbatch as the user and waits for the job; prints the job id.
submit_wait() {  # submit_wait SBATCH_ARGS...
  local out
  out=$(as_user sbatch --parsable -o "$TMP/slurm-%j.out" "$@" --wrap true) || true
  out=${out%%$'\n'*}
  [[ $out =~ ^[0-9]+ ]] || fail "sbatch did not submit: $out"
  wait_job "${out%%;*}"
  echo "${out%%;*}"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

set_notify() {  # set_notify URL: rewrites notify_url in the cluster's policy
  sed -i "s|^notify_url = .*|notify_url = \"$1\"|" "$POLICY"
}

start_receiver() {  # start_receiver PORT DIR
  mkdir -p "$2"
  python3 "$SRC/tests/slurm/receiver.py" "$1" "$KEY" "$2" &
  BACKGROUND+=($!)
  wait_for_file "$2/ready" 10
}

node_state() { sinfo -h -N -o '%t' | head -n1; }

wait_node_idle() {  # wait_node_idle [SECONDS]: 60 by default
  local i s limit=${1:-60}
  for ((i = 0; i < limit; i++)); do
    s=$(node_state)
    [[ $s == idle ]] && return 0
    [[ $s == drain* || $s == down* ]] && fail "node is $s after the job"
    sleep 1
  done
  fail "node not idle after $limit s (state $s)"
}

check_named() {  # check_named JOB NAME: prints status of check NAME
  json "$STATE/verdicts/$1.json" "[c['status'] for c in d['checks'] if c['name']=='$2'] or ['absent']" |
    tr -d "[]'"
}

check_detail() {  # check_detail JOB NAME: prints the detail of check NAME
  json "$STATE/verdicts/$1.json" "[c['detail'] for c in d['checks'] if c['name']=='$2'][0]"
}

verdict_text() { json "$STATE/verdicts/$1.json" 'json.dumps(d)'; }

