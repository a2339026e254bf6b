#!/usr/bin/env bash
# A user's program in the pinned image, run by podman, on the local cluster
# ([container] runtime, pilot.toml(5); spank_pilot(8), CONTAINERS).
#
#   container.sh CASE   CASE: podman | podman_python
#
# The image is built here from Debian's busybox-static (podman import),
# pushed to a local docker-registry over its HTTP API (podman push), and
# run by digest. Environment as for e2e.sh (lib.sh).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

PORT=${PILOT_REGISTRY_PORT:-5000}
REG=127.0.0.1:$PORT
ROOTDIR=$(mktemp -d /tmp/pilot-ctr.XXXXXX)   # root's: podman's storage and config
# shellcheck source=tests/slurm/image_lib.sh
source "$(dirname "$0")/image_lib.sh"
cp "$POLICY" "$ROOTDIR/pilot.conf.saved"

container_cleanup() {
  cp "$ROOTDIR/pilot.conf.saved" "$POLICY"
  image_cleanup
  cleanup
}
trap container_cleanup EXIT

reason_of() {
  json "$STATE/verdicts/$1.json" "'\n'.join(c['name'] + ': ' + c['detail'] for c in d['checks'] if c['status']=='fail')"
}

# A case's start: the registry, its image pushed by PUSH (push_image or
# push_python_image), podman allowed, the programs copied for the user. Sets
# the caller's digest and dir.
start_with_image() {  # start_with_image PUSH REPO:TAG COPY_NAME
  command -v podman >/dev/null || fail "podman is not installed (scripts/setup)"
  start_registry
  digest=$("$1" "$2")
  [[ $digest == sha256:* ]] || fail "no digest from the registry: $digest"
  allow_podman
  dir=$(user_copy "$SRC/tests/slurm/container" "$3")
}

container_toml() {  # container_toml FILE DIR IMAGE
  program_toml "$1" ctr "$2" 1 "[\"/bin/sh\", \"$2/loss.sh\"]" \
    'loss_pattern = "loss=([0-9.]+)"' "[container]" "image = \"$3\"" 'runtime = "podman"'
}

# The image runs: the digest that ran is read back and equals the pinned
# one, the program saw the image's own file and none of the node's root
# folder, its cgroup is made inside the job's, and the verdict is GO with the
# digest in its identity (the shell program saves a torch.save checkpoint
# with optimizer state that the image carries); a tag moved while a
# pilot runs leaves the pinned digest running and is reported; a bind the
# site does not allow is refused at submission; an image the registry does
# not have is a NO-GO that names it, and the node stays idle.
case_podman() {
  local t0=$SECONDS dir digest job res
  start_with_image push_image pilot/ctr:v1 ctr
  container_toml "$dir/ctr.toml" "$dir" "$REG/pilot/ctr:v1"
  job=$(submit_wait --pilot="$dir/ctr.toml")
  wait_verdict "$job"
  res=$STATE/jobs/$job/results.json
  [[ $(json "$STATE/jobs/$job/lock.json" 'd["container"]["digest"]') == "$digest" ]] ||
    fail "lock: $(json "$STATE/jobs/$job/lock.json" 'd["container"]')"
  [[ $(json "$res" 'd["program"]["container"]["digest"] + " " + d["program"]["container"]["digest_source"]') == "$digest runtime" ]] ||
    fail "digest read back: $(json "$res" 'd["program"].get("container")') $(reason_of "$job")"
  [[ $(json "$res" 'd["program"]["container"]["image"]') == "$REG/pilot/ctr@$digest" ]] ||
    fail "not started by digest: $(json "$res" 'd["program"]["container"]["image"]')"
  [[ $(check_named "$job" container) == pass ]] || fail "container check: $(reason_of "$job")"
  [[ $(check_named "$job" restore) == pass ]] || fail "restore: $(reason_of "$job")"
  local seen
  seen=$(json "$res" "d['program']['processes'][0]['stderr_tail']")
  [[ $seen == *inside-the-image* ]] || fail "the program did not see the image's own file: $seen"
  # The node's own folders stay outside (the image has no /usr), and the
  # container's cgroup is made inside the job's, not under podman's parent.
  grep -q "^root: bin " <<<"$seen" && ! grep -q "^root: .* usr " <<<"$seen" ||
    fail "the program saw the node's root folder: $seen"
  grep -q "^cgroup .*/libpod-" <<<"$seen" && ! grep -q "libpod_parent" <<<"$seen" ||
    fail "the container's cgroup is not inside the job's: $seen"
  [[ $(decision "$job") == GO ]] || fail "job $job: $(decision "$job"): $(reason_of "$job")"
  [[ $(check_named "$job" checkpoint) == pass ]] || fail "checkpoint: $(check_detail "$job" checkpoint)"
  [[ $(json "$STATE/verdicts/$job.json" 'd["identity"]["lines"][1]') == "container $digest" ]] ||
    fail "the verdict's identity does not hold the digest: $(json "$STATE/verdicts/$job.json" 'd["identity"]')"
  note "podman: ran $digest: GO, container check pass ($((SECONDS - t0)) s so far)"

  # The tag moves while a pilot runs (its reference process waits for it):
  # the pinned digest still ran, and the verdict says the tag moved.
  program_toml "$dir/moving.toml" ctr "$dir" 1 "[\"/bin/sh\", \"$dir/loss.sh\"]" \
    'loss_pattern = "loss=([0-9.]+)"' "env = { WAIT_FOR = \"$dir/tag-moved\" }" "[container]" \
    "image = \"$REG/pilot/ctr:v1\"" 'runtime = "podman"'
  job=$(as_user sbatch --parsable -o "$TMP/slurm-%j.out" --pilot="$dir/moving.toml" --wrap true)
  wait_for_file "$STATE/jobs/$job/lock.json" 120
  local moved
  moved=$(push_image pilot/ctr:v1 "a-later-image")
  [[ $moved == sha256:* && $moved != "$digest" ]] || fail "the tag did not move: $moved"
  as_user touch "$dir/tag-moved"
  wait_verdict "$job"
  res=$STATE/jobs/$job/results.json
  [[ $(json "$res" 'd["program"]["container"]["digest"]') == "$digest" ]] ||
    fail "job $job: not the pinned digest ran: $(json "$res" 'd["program"].get("container")')"
  [[ $(check_named "$job" container) == pass ]] || fail "job $job: container: $(reason_of "$job")"
  [[ $(check_named "$job" container_tag) == warn &&
     $(check_detail "$job" container_tag) == *"moved during the job; the pilot ran the pinned $digest"* ]] ||
    fail "job $job: the moved tag is not reported: $(check_detail "$job" container_tag)"
  note "podman: the tag moved to $moved during job $job; the pinned $digest ran"

  # A pilot cancelled while its program runs in the image: the container
  # goes with the job (none left in root's store, running or stopped), and
  # the node stays up.
  program_toml "$dir/cancel.toml" ctr "$dir" 1 "[\"/bin/sh\", \"$dir/loss.sh\"]" \
    'loss_pattern = "loss=([0-9.]+)"' "env = { WAIT_FOR = \"$dir/never\" }" "[container]" \
    "image = \"$REG/pilot/ctr:v1\"" 'runtime = "podman"'
  job=$(as_user sbatch --parsable -o "$TMP/slurm-%j.out" --pilot="$dir/cancel.toml" --wrap true)
  local i running=""
  for ((i = 0; i < 240; i++)); do
    running=$(CONTAINERS_CONF=$ROOTDIR/containers.conf podman --root "$ROOTDIR/cache" ps -q \
      --filter "name=^pilot-$job-" 2>/dev/null)
    [[ -n $running ]] && break
    sleep 0.25
  done
  [[ -n $running ]] || fail "job $job: its container never ran"
  scancel "$job"
  wait_job "$job"
  local left
  left=$(CONTAINERS_CONF=$ROOTDIR/containers.conf podman --root "$ROOTDIR/cache" ps -a \
    --filter "name=^pilot-$job-" --format '{{.Names}} {{.Status}}' 2>&1)
  [[ -z $left ]] || fail "job $job cancelled: containers left: $left; the job said: $(tail -n 8 "$TMP/slurm-$job.out" 2>&1)"
  wait_node_idle
  [[ $(node_state) == idle* ]] || fail "node not idle after job $job was cancelled: $(node_state)"
  note "podman: job $job cancelled while its container ran: none left, node idle"

  # A bind the site does not allow is refused at submission, at its line.
  local out
  program_toml "$dir/etc.toml" ctr "$dir" 1 "[\"/bin/sh\", \"$dir/loss.sh\"]" \
    'loss_pattern = "loss=([0-9.]+)"' "[container]" "image = \"$REG/pilot/ctr:v1\"" 'runtime = "podman"' \
    'mounts = ["/etc:/host-etc"]'
  out=$(as_user sbatch --parsable --pilot="$dir/etc.toml" --wrap true 2>&1) && fail "a bind of /etc was submitted: $out"
  grep -q "$dir/etc.toml:[0-9]*: container.mounts: \"/etc\" is outside the folders this cluster allows" <<<"$out" ||
    fail "the refusal does not name the mount: $out"

  local missing
  missing=$REG/pilot/ctr@sha256:$(printf '0%.0s' {1..64})
  container_toml "$dir/missing.toml" "$dir" "$missing"
  job=$(submit_wait --pilot="$dir/missing.toml")
  wait_verdict "$job"
  [[ $(decision "$job") == NO-GO ]] || fail "a missing image was not a NO-GO"
  # (Read whole first: grep -q would leave the writer a closed pipe.)
  local why
  why=$(reason_of "$job")
  [[ $why == *pilot/ctr* ]] || fail "the NO-GO does not name the image: $why"
  [[ $(check_detail "$job" container) == *"podman could not start the image (exit 125): Error:"*"manifest unknown"* ]] ||
    fail "the container check does not say the pull failed: $(check_detail "$job" container)"
  [[ $(node_state) == idle* ]] || fail "node not idle: $(node_state)"
  note "podman: missing image NO-GO ($(reason_of "$job" | head -n1)), node idle; the case took $((SECONDS - t0)) s"
}

# A Python program in an image of Debian's python3 without torch, two
# ranks, each its own container, reporting through the probe's socket bound
# in: what the probe saw is the image's interpreter and distributions (one
# only the image has, none of the node's torch), not the node's; GO.
case_podman_python() {
  local t0=$SECONDS dir digest job res env
  start_with_image push_python_image pilot/py:v1 py
  program_toml "$dir/py.toml" py "$dir" 2 "[\"/usr/bin/python3\", \"$dir/probe_program.py\"]" \
    "[container]" "image = \"$REG/pilot/py:v1\"" 'runtime = "podman"'
  job=$(submit_wait --pilot="$dir/py.toml")
  wait_verdict "$job"
  res=$STATE/jobs/$job/results.json
  [[ $(json "$res" 'd["program"]["container"]["digest"]') == "$digest" ]] ||
    fail "digest read back: $(json "$res" 'd["program"].get("container")') $(reason_of "$job")"
  env=$(json "$res" 'json.dumps(d["program"].get("environment"))')
  [[ $(json "$res" 'd["program"]["environment"]["distributions"].get("pilot-image-marker")') == 3.1.4 ]] ||
    fail "the probe did not see the image's distributions: $env"
  [[ $(json "$res" '"torch" in d["program"]["environment"]["distributions"]') == False &&
     -z $(json "$res" 'd["program"]["environment"]["torch"]') ]] ||
    fail "the probe saw the node's torch: $env"
  [[ $(json "$res" 'd["program"]["environment"]["python"]') == "$(/usr/bin/python3 -c 'import platform; print(platform.python_version())')" ]] ||
    fail "python version: $env"
  local seen ranks
  seen=$(json "$res" "'\n'.join(p['stderr_tail'] for p in d['program']['processes'])")
  [[ $seen == *inside-the-python-image* ]] || fail "the program did not see the image's own file: $seen"
  ranks=$(json "$res" "sorted({(p['stage'], p['rank']) for p in d['program']['processes']})")
  [[ $ranks == *"('node', 1)"* ]] || fail "not two ranks in the node stage: $ranks"
  [[ $(decision "$job") == GO ]] || fail "job $job: $(decision "$job"): $(reason_of "$job")"
  note "podman_python: ranks $ranks in $digest, distributions seen: $(json "$res" 'len(d["program"]["environment"]["distributions"])'): GO ($((SECONDS - t0)) s)"
}

run_case "$@"
