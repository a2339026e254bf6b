#!/bin/bash
# The admin gate end to end on a real Slurm 22.05 controller with
# JobSubmitPlugins=lua and etc/job_submit.lua: a long job is rejected, the
# same job in a reservation made by `pilot grant` is accepted, and grants are
# refused for NO-GO, expired, edited and other users' verdicts.
#
# Usage: gate_e2e.sh PILOT_BINARY SOURCE_DIR. Root only (starts munged,
# slurmctld and slurmd in a private folder with their own ports, stops them
# by pid at the end). Exit 77 (skip) without root or the Slurm daemons.
set -uo pipefail
PILOT=$1
SRC=$2
SBIN=${PILOT_SLURM_SBIN:-/usr/sbin}
PORT=${PILOT_GATE_PORT:-26817}
USER_OK=${PILOT_GATE_USER:-pilotuser}

[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root"; exit 77; }
for p in munged slurmctld slurmd; do
  [[ -x $SBIN/$p ]] || { echo "SKIP: $SBIN/$p missing"; exit 77; }
done
id "$USER_OK" >/dev/null 2>&1 || { echo "SKIP: no user $USER_OK (PILOT_GATE_USER)"; exit 77; }
[[ -f /usr/lib/x86_64-linux-gnu/slurm-wlm/job_submit_lua.so ]] || { echo "SKIP: no job_submit_lua.so"; exit 77; }

C=$(mktemp -d /tmp/pilot-gate.XXXXXX)
chmod 755 "$C"
stop() {
  for n in slurmd slurmctld munged; do
    if [[ -s $C/run/$n.pid ]]; then
      pid=$(cat "$C/run/$n.pid")
      kill -TERM "$pid" 2>/dev/null
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
  done
  rm -rf "$C"
}
trap stop EXIT
failures=0
check() {  # check NAME WANT_RC RC OUTPUT WANT_TEXT
  if [[ $3 -ne $2 || ( -n $5 && $4 != *"$5"* ) ]]; then
    echo "FAIL $1: exit $3 (want $2): $4"
    failures=$((failures + 1))
  else
    echo "ok $1"
  fi
}

mkdir -p "$C"/{etc,munge,munge-run,run,log,spool/ctld,spool/d,state/verdicts}
chmod 700 "$C/munge"
head -c 1024 /dev/urandom >"$C/munge/munge.key"
chmod 400 "$C/munge/munge.key"
host=$(hostname -s)
cat >"$C/etc/slurm.conf" <<EOF
ClusterName=pilotgate
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$C/munge-run/munge.socket
StateSaveLocation=$C/spool/ctld
SlurmdSpoolDir=$C/spool/d
SlurmctldPidFile=$C/run/slurmctld.pid
SlurmdPidFile=$C/run/slurmd.pid
SlurmctldLogFile=$C/log/slurmctld.log
SlurmdLogFile=$C/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobSubmitPlugins=lua
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
sed "s#^GRANTS_DIR = .*#GRANTS_DIR = \"$C/state/grants\"#" "$SRC/etc/job_submit.lua" >"$C/etc/job_submit.lua"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$C/etc/verdict.key"
echo >>"$C/etc/verdict.key"
chmod 600 "$C/etc/verdict.key"
cat >"$C/etc/pilot.conf" <<EOF
state_dir = "$C/state"
key_file = "$C/etc/verdict.key"
hardware_catalog = "$SRC/etc/hardware.toml"
EOF
export SLURM_CONF=$C/etc/slurm.conf
"$SBIN/munged" --key-file="$C/munge/munge.key" --socket="$C/munge-run/munge.socket" \
  --pid-file="$C/run/munged.pid" --seed-file="$C/munge/munged.seed" \
  --log-file="$C/log/munged.log" --force || exit 1
"$SBIN/slurmctld" -i -f "$SLURM_CONF" || exit 1
"$SBIN/slurmd" -f "$SLURM_CONF" || exit 1
for _ in $(seq 60); do
  [[ $(sinfo -h -N -o '%t' 2>/dev/null) == idle ]] && break
  sleep 1
done

# Verdicts signed with the site key (canonical JSON: sorted keys, compact).
python3 - "$C" "$USER_OK" <<'EOF'
import datetime, hashlib, hmac, json, sys, time
C, user = sys.argv[1], sys.argv[2]
key = bytes.fromhex(open(C + "/etc/verdict.key").read().strip())
now = int(time.time())
t = lambda s: datetime.datetime.fromtimestamp(s, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
def make(jid, who=user, decision="GO", expires=now + 13 * 86400, edit=None):
    v = {"schema": "slurm-pilot/verdict/1",
         "job": {"id": jid, "user": who, "run": "gpt-1b", "config_sha256": "a" * 64},
         "decision": decision, "binding": True,
         "checks": [{"name": "restore", "status": "pass" if decision == "GO" else "fail",
                     "measured": "equal", "threshold": "equal", "detail": "",
                     "verified_by": "epilog"}],
         "hardware": [],
         "budget": {"term": "30-day", "days": 19.5, "gpu_hours": 3744.0, "cost": 0.5,
                    "currency": "USD", "breakdown": {"train": 16.5, "buffer": 3.0}},
         "issued": t(now - 60), "expires": t(expires),
         "key_id": hashlib.sha256(key).hexdigest()[:16]}
    canon = json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    v["signature"] = hmac.new(key, canon.encode(), hashlib.sha256).hexdigest()
    if edit: edit(v)
    open("%s/state/verdicts/%d.json" % (C, jid), "w").write(json.dumps(v, indent=2) + "\n")
make(500)
make(501, decision="NO-GO")
make(502, expires=now - 3600)
make(503, edit=lambda v: v["budget"].update(term="30-day", days=1.0))
make(504, who="root")
EOF

POL=(--policy "$C/etc/pilot.conf")
out=$("$PILOT" verdict "${POL[@]}" 500 2>&1); check "verdict signature valid" 0 $? "$out" "signature valid"
as_user() { su "$USER_OK" -s /bin/sh -c "SLURM_CONF=$SLURM_CONF $*" 2>&1; }

out=$(as_user sbatch --time=10-0 --hold --wrap true); check "long job rejected" 1 $? "$out" "pilot verdict"
out=$(as_user sbatch --time=2-0 --hold --wrap true); check "short job accepted" 0 $? "$out" "Submitted"
out=$("$PILOT" grant "${POL[@]}" 501 --nodes 1 2>&1); check "grant NO-GO refused" 1 $? "$out" "NO-GO"
out=$("$PILOT" grant "${POL[@]}" 502 --nodes 1 2>&1); check "grant expired refused" 1 $? "$out" "expired"
out=$("$PILOT" grant "${POL[@]}" 503 --nodes 1 2>&1); check "grant edited refused" 1 $? "$out" "signature mismatch"
out=$("$PILOT" grant "${POL[@]}" 500 --nodes 1 --user root 2>&1); check "grant other user refused" 1 $? "$out" "belongs to user $USER_OK"
out=$("$PILOT" grant "${POL[@]}" 500 --nodes 1 --duration 31d 2>&1); check "grant too long refused" 1 $? "$out" "exceeds the 30-day term"
out=$(scontrol show reservation 2>&1); check "no reservation created by refusals" 0 $? "$out" "No reservations"
out=$("$PILOT" grant "${POL[@]}" 500 --nodes 1 --duration 20-0 --partition debug 2>&1); check "grant GO" 0 $? "$out" "granted pilot_500"
out=$(scontrol show reservation pilot_500 2>&1); check "reservation exists" 0 $? "$out" "Users=$USER_OK"
# Admission into the reservation needs --pilot-run=500 too (the plugin sets
# it; this controller loads no plugin): slurm_binding (tests/slurm) runs it.
out=$(as_user sbatch --time=15-0 --reservation=pilot_500 --hold --wrap true); check "long job in reservation without --pilot-run rejected" 1 $? "$out" "--pilot-run=500"
out=$(sbatch --time=15-0 --reservation=pilot_500 --hold --wrap true 2>&1); check "other user's reservation rejected" 1 $? "$out" "not granted to root"
if ((failures > 0)); then
  echo "$failures failed; slurmctld log:"
  tail -20 "$C/log/slurmctld.log"
  exit 1
fi
