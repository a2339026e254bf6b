#!/usr/bin/env bash
# CTest fixture of the `slurm` tests: start or stop one of the shared local
# clusters of scripts/local-slurm for this build, and make sure its
# unprivileged test users exist (jobs must not run as root for the trust
# model to be tested). `down` removes the cluster folder and keeps a copy of
# its logs in the build ($PILOT_CLUSTER_LOGS, default slurm-cluster-log/),
# where a failed run can be read afterwards.
#
#   cluster.sh up | down        (environment as for e2e.sh; the cluster's
#                                ports, name and first job id as for
#                                scripts/local-slurm, tests/slurm/CMakeLists.txt
#                                sets them per cluster)
set -euo pipefail
SRC=${PILOT_SOURCE_DIR:?}
BUILD=${PILOT_BUILD_DIR:?}
export PILOT_CLUSTER_DIR=${PILOT_CLUSTER_DIR:?}
TEST_USER=${PILOT_TEST_USER:-pilotuser}
TEST_USER2=${PILOT_TEST_USER2:-pilotuser2}
LOGS=$BUILD/${PILOT_CLUSTER_LOGS:-slurm-cluster-log}

# shellcheck source=tests/slurm/users.sh
source "$SRC/tests/slurm/users.sh"

case ${1:-} in
  up)
    # The second user (cases of two users) too, so that no case makes one
    # while the other cluster's case makes its own.
    for u in "$TEST_USER" "$TEST_USER2"; do
      ensure_user "$u" || { echo "cluster.sh: cannot make the user $u" >&2; exit 1; }
    done
    # A cluster left over by an interrupted run is stopped first, and its
    # state is dropped so job ids and verdicts start afresh.
    "$SRC/scripts/local-slurm" down >/dev/null 2>&1 || true
    rm -rf "$PILOT_CLUSTER_DIR"
    PILOT_JOB_USER=$TEST_USER "$SRC/scripts/local-slurm" up "$BUILD"
    ;;
  down)
    "$SRC/scripts/local-slurm" down
    if [[ -d $PILOT_CLUSTER_DIR/log ]]; then
      rm -rf "$LOGS"
      cp -r "$PILOT_CLUSTER_DIR/log" "$LOGS"
    fi
    "$SRC/scripts/local-slurm" down --purge
    ;;
  *)
    echo "usage: cluster.sh up|down" >&2
    exit 2
    ;;
esac
