#!/usr/bin/env bash
# CTest fixture of the `slurm` tests: start or stop the local cluster of
# scripts/local-slurm for this build, and make sure the unprivileged test
# user exists (jobs must not run as root for the trust model to be tested).
# `down` removes the cluster folder and keeps a copy of its logs in the build
# (slurm-cluster-log/), where a failed run can be read afterwards.
#
#   cluster.sh up | down        (environment as for e2e.sh)
set -euo pipefail
SRC=${PILOT_SOURCE_DIR:?}
BUILD=${PILOT_BUILD_DIR:?}
export PILOT_CLUSTER_DIR=${PILOT_CLUSTER_DIR:?}
TEST_USER=${PILOT_TEST_USER:-pilotuser}

case ${1:-} in
  up)
    if ! id "$TEST_USER" >/dev/null 2>&1; then
      useradd --create-home --shell /bin/bash "$TEST_USER"
    fi
    # A cluster left over by an interrupted run is stopped first, and its
    # state is dropped so job ids and verdicts start afresh.
    "$SRC/scripts/local-slurm" down >/dev/null 2>&1 || true
    rm -rf "$PILOT_CLUSTER_DIR"
    PILOT_JOB_USER=$TEST_USER "$SRC/scripts/local-slurm" up "$BUILD"
    ;;
  down)
    "$SRC/scripts/local-slurm" down
    if [[ -d $PILOT_CLUSTER_DIR/log ]]; then
      rm -rf "$BUILD/slurm-cluster-log"
      cp -r "$PILOT_CLUSTER_DIR/log" "$BUILD/slurm-cluster-log"
    fi
    "$SRC/scripts/local-slurm" down --purge
    ;;
  *)
    echo "usage: cluster.sh up|down" >&2
    exit 2
    ;;
esac
