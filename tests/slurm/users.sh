# The unprivileged users the Slurm cases' jobs run as (sourced, not run).
# The fixtures of the shared clusters and the two-node cluster's first case
# start at once: useradd may find /etc/passwd locked by another, or the
# user made by it meanwhile, so each try looks again.

ensure_user() {  # ensure_user NAME: 0 once the user exists, 1 after 15 s of tries
  local i
  for ((i = 0; i < 30; i++)); do
    id "$1" >/dev/null 2>&1 && return 0
    useradd --create-home --shell /bin/bash "$1" 2>/dev/null && return 0
    sleep 0.5
  done
  id "$1" >/dev/null 2>&1
}
