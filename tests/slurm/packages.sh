#!/usr/bin/env bash
# The Debian packages on this machine (scripts/package; pilot-install(7)).
# What no other case proves: that an installation from the packages alone
# runs a pilot to a signed GO (every other case runs copies of the build's
# programs with a policy, key and plugstack line local-slurm writes), and
# that an upgrade keeps the site's keys, verdicts, grants and edited
# conffiles. Its cluster (`local-slurm up --installed`) names only installed
# files: Prolog=/usr/sbin/pilot-prolog, Slurm's /etc/slurm/plugstack.conf
# with the packaged snippet, the installed pilot.conf and the keys the
# node package's postinst made; the program imports the installed probe;
# pilot doctor finds nothing missing on the node.
# A file left out of a package, a wrong mode or owner, an undeclared
# dependency (dpkg -i refuses) or a postinst that replaces a key fails it.
#
#   packages.sh CASE   CASE: install_upgrade
#
# Root, on a machine where slurm-pilot is not installed (CI's fresh one):
# it installs the packages with dpkg -i and purges them at the end, also
# when it fails. Environment as for e2e.sh (lib.sh); its own cluster folder
# and ports (tests/slurm/CMakeLists.txt). The build must be configured with
# -DCMAKE_INSTALL_PREFIX=/usr (scripts/test does).
set -euo pipefail
# shellcheck source=tests/slurm/users.sh
source "$(dirname "$0")/users.sh"
ensure_user "${PILOT_TEST_USER:-pilotuser}" || { echo "cannot make the test user" >&2; exit 1; }
source "$(dirname "$0")/lib.sh"

PACKAGES=(slurm-pilot-client slurm-pilot-node slurm-pilot-controller)
ETC=/etc/slurm-pilot
POLICY=$ETC/pilot.conf
STATE=/var/lib/slurm-pilot
KEYS=("$ETC/verdict.key" "$ETC/verdict-ed25519.key" "$ETC/verdict-ed25519.pub")
PILOT=/usr/bin/pilot
LINK=/etc/slurm/job_submit.lua
SNIPPET=/etc/slurm/plugstack.conf.d/slurm-pilot.conf
LOCAL_SLURM=$SRC/scripts/local-slurm
LOGS=$BUILD/${PILOT_CLUSTER_LOGS:-slurm-cluster-pkg-log}

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q ' installed$'; }

RESV="" TOUCHED=0 WATCHDOG=""
packages_cleanup() {
  # Its sleep first: the watchdog then ends without signalling.
  [[ -n $WATCHDOG ]] && kill $(pgrep -P "$WATCHDOG") "$WATCHDOG" 2>/dev/null || true
  [[ -n $RESV ]] && scontrol delete reservation "$RESV" >/dev/null 2>&1 || true
  if [[ -d $CLUSTER/log ]]; then
    "$LOCAL_SLURM" down >/dev/null 2>&1 || true
    rm -rf "$LOGS"
    cp -r "$CLUSTER/log" "$LOGS" 2>/dev/null || true
  fi
  "$LOCAL_SLURM" down --purge >/dev/null 2>&1 || true
  # Leaves the machine as found: nothing of slurm-pilot installed.
  ((TOUCHED)) && dpkg --purge "${PACKAGES[@]}" >/dev/null 2>&1 || true
  rm -rf "$TMP"
}
trap packages_cleanup EXIT
# ctest kills a test past its TIMEOUT (400 s) without a trap: this case ends
# itself first, so that its cleanup purges the packages.
trap 'fail "still running after 330 s"' TERM
(sleep 330 && kill -TERM $$) 2>/dev/null &
WATCHDOG=$!

# mode_of PATH: "MODE OWNER GROUP" of PATH.
mode_of() { stat -c '%a %U %G' "$1"; }
expect_mode() {  # expect_mode PATH "MODE OWNER GROUP"
  [[ -e $1 ]] || fail "$1 is missing"
  [[ $(mode_of "$1") == "$2" ]] || fail "$1 is $(mode_of "$1"), not $2"
}

# What an upgrade must keep: the keys, the state folder's folders, every
# verdict and grant (their bytes, modes and owners) and the admin's policy.
snapshot() {  # snapshot FILE
  {
    for f in "${KEYS[@]}" "$POLICY"; do echo "$(mode_of "$f") $(sha256sum "$f")"; done
    find "$STATE" -maxdepth 1 -mindepth 1 -type d -printf '%m %u %g %p\n' | sort
    find "$STATE/verdicts" "$STATE/grants" -type f -printf '%m %u %g %p\n' | sort
    find "$STATE/verdicts" "$STATE/grants" -type f -exec sha256sum {} + | sort -k2
  } >"$1"
}

# A GO pilot of tiny.py through the installed files (its budget a 30-day
# term, as binding.sh's, so it can be granted): prints the job id.
go_pilot() {  # go_pilot NAME
  local dir job
  dir=$(user_copy "$SRC/tests/program" "$1")
  program_toml "$dir/pkg.toml" "$1" "$dir" 1 '["python3", "tiny.py", "--step-cpu", "0.3"]' 'pin = ["tiny.py"]'
  sed -i -e 's/^gpus_per_node = 2$/&\npreprocess_hours = 240/' "$dir/pkg.toml"
  job=$(as_user sbatch --parsable -o "$TMP/slurm-%j.out" --pilot="$dir/pkg.toml" --pilot-stage=single \
    --wrap true) || fail "sbatch did not submit: $job"
  job=${job%%;*}
  wait_job "$job" 120
  wait_verdict "$job" 60
  [[ $(decision "$job") == GO ]] || fail "job $job: $(decision "$job"): $(verdict_text "$job")"
  echo "$job"
}

# The verdict of JOB verifies: as the user with the public key (pilot
# verdict), and offline with verify-verdict.
verdict_verifies() {  # verdict_verifies JOB
  local out
  out=$(as_user "$PILOT" verdict "$1" 2>&1) || fail "pilot verdict $1: $out"
  grep -q "valid (ed25519" <<<"$out" || fail "the user cannot check the signature of $1: $out"
  cp "$STATE/verdicts/$1.json" "$TMP/copy-$1.json"
  chmod 0644 "$TMP/copy-$1.json"
  out=$(as_user "$PILOT" verify-verdict "$TMP/copy-$1.json" 2>&1) || fail "verify-verdict $1: $out"
}

# The packages' contents and control fields, before any is installed.
check_packages() {  # check_packages VERSION DEB...
  local version=$1 deb name list
  shift
  for deb in "$@"; do
    name=$(dpkg-deb -f "$deb" Package)
    [[ $(dpkg-deb -f "$deb" Version) == "$version" ]] || fail "$deb: version $(dpkg-deb -f "$deb" Version)"
    list=$(dpkg-deb -c "$deb")
    # No key travels in a package: each site's are made at its install.
    grep -E 'verdict(-ed25519)?\.(key|pub)$' <<<"$list" && fail "$deb ships a key"
    case $name in
      slurm-pilot-client)
        for f in "-rwxr-xr-x root/root .* ./usr/bin/pilot$" \
                 "-rw-r--r-- root/root .* ./usr/lib/[^/]*/slurm-wlm/spank_pilot.so$" \
                 "-rw-r--r-- root/root .* ./usr/lib/[^/]*/slurm-wlm/spank_pilot_impl.so$" \
                 "-rw-r--r-- root/root .* .$POLICY$" "-rw-r--r-- root/root .* .$ETC/hardware.toml$" \
                 "-rw-r--r-- root/root .* .$SNIPPET$" \
                 "-rw-r--r-- root/root .* ./usr/share/slurm-pilot/python/slurm_pilot/__init__.py$" \
                 "-rw-r--r-- root/root .* ./usr/share/man/man7/pilot-install.7$" \
                 "-rw-r--r-- root/root .* ./usr/share/man/man1/pilot.1$"; do
          grep -qE -- "$f" <<<"$list" || fail "$deb: no line like '$f' in: $list"
        done
        dpkg-deb -I "$deb" conffiles | grep -qx "$SNIPPET" || fail "$deb: the snippet is no conffile"
        dpkg-deb -f "$deb" Depends | grep -q 'slurm-client' || fail "$deb: Depends $(dpkg-deb -f "$deb" Depends)" ;;
      slurm-pilot-node)
        for f in pilot-prolog pilot-epilog pilot-supervisor; do
          grep -qE -- "-rwxr-xr-x root/root .* ./usr/sbin/$f$" <<<"$list" || fail "$deb: no /usr/sbin/$f: $list"
        done
        grep -qE -- "-rwxr-xr-x root/root .* ./usr/bin/pilot-runner$" <<<"$list" || fail "$deb: no pilot-runner: $list"
        # dpkg-shlibdeps' libraries, the client of the same version, slurmd.
        dpkg-deb -f "$deb" Depends | grep -q "slurm-pilot-client (= $version)" ||
          fail "$deb: Depends $(dpkg-deb -f "$deb" Depends)"
        dpkg-deb -f "$deb" Depends | grep -q 'slurmd' || fail "$deb: no slurmd in Depends"
        dpkg-deb -f "$deb" Depends | grep -q 'libc6' || fail "$deb: no shared library in Depends" ;;
      slurm-pilot-controller)
        grep -qE -- "-rw-r--r-- root/root .* .$ETC/job_submit.lua$" <<<"$list" || fail "$deb: no job_submit.lua: $list"
        dpkg-deb -I "$deb" conffiles | grep -qx "$ETC/job_submit.lua" || fail "$deb: job_submit.lua is no conffile" ;;
      *) fail "$deb: unexpected package $name" ;;
    esac
  done
}

case_install_upgrade() {
  local t0=$SECONDS version prev p debs_prev debs_cur job1 job2 out
  for p in "${PACKAGES[@]}"; do
    ! installed "$p" || fail "$p is installed on this machine: this case installs and purges its own"
  done
  for p in "$ETC" "$STATE" "$LINK" "$SNIPPET"; do
    [[ ! -e $p && ! -L $p ]] || fail "$p exists: this case needs a machine without slurm-pilot"
  done

  # The same build twice: the previous packages have a lower version.
  version=$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$BUILD/CPackConfig.cmake")
  [[ -n $version ]] || fail "no CPACK_PACKAGE_VERSION in $BUILD/CPackConfig.cmake"
  prev=$version~prev1
  # Both at once: most of it is stripping and compressing, one core each.
  "$SRC/scripts/package" --version "$prev" --out "$TMP/prev" "$BUILD" >"$TMP/prev.list" &
  p=$!
  "$SRC/scripts/package" --out "$TMP/current" "$BUILD" >"$TMP/current.list" || fail "scripts/package failed"
  wait "$p" || fail "scripts/package --version $prev failed"
  mapfile -t debs_prev <"$TMP/prev.list"
  mapfile -t debs_cur <"$TMP/current.list"
  ((${#debs_prev[@]} == 3 && ${#debs_cur[@]} == 3)) ||
    fail "three packages each: ${debs_prev[*]} / ${debs_cur[*]}"
  dpkg --compare-versions "$prev" lt "$version" || fail "$prev does not sort before $version"
  check_packages "$prev" "${debs_prev[@]}"
  check_packages "$version" "${debs_cur[@]}"
  note "packages $prev and $version built and checked ($((SECONDS - t0)) s)"

  # Install the previous packages; dpkg refuses any whose dependencies are
  # not installed.
  TOUCHED=1
  out=$(dpkg -i "${debs_prev[@]}" 2>&1) || fail "dpkg -i $prev: $out"
  for p in "${PACKAGES[@]}"; do
    [[ $(dpkg-query -W -f='${Version}' "$p") == "$prev" ]] || fail "$p: not $prev installed"
  done
  # The state folder and keys as the prolog, epilog and pilot.conf(5) expect.
  expect_mode "$STATE" "755 root root"
  for p in jobs verdicts grants runs; do expect_mode "$STATE/$p" "755 root root"; done
  for p in outbox attic; do expect_mode "$STATE/$p" "700 root root"; done
  expect_mode "${KEYS[0]}" "600 root root"
  expect_mode "${KEYS[1]}" "600 root root"
  expect_mode "${KEYS[2]}" "644 root root"
  [[ $(readlink "$LINK") == "$ETC/job_submit.lua" ]] || fail "$LINK: $(ls -l "$LINK" 2>&1)"
  [[ -d $STATE/refusals && $(stat -c %a "$STATE/refusals") == 755 ]] || fail "no refusals folder"
  out=$(dpkg-query -W -f='${Conffiles}\n' slurm-pilot-client)
  for p in "$POLICY" "$ETC/hardware.toml" "$SNIPPET"; do
    grep -q " $p " <<<"$out" || fail "$p is not a conffile: $out"
  done
  # The admin's edit of a conffile: a node without Yama (a container)
  # warns about ptrace_scope instead of failing every pilot.
  sed -i '1i # Edited on this site.' "$POLICY"
  if [[ $(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo -1) -lt 1 ]]; then
    sed -i '1a require_ptrace_scope = false' "$POLICY"
  fi
  note "$prev installed ($((SECONDS - t0)) s)"

  PILOT_JOB_USER=$TEST_USER "$LOCAL_SLURM" up --installed >/dev/null
  grep -qx "Prolog=/usr/sbin/pilot-prolog" "$SLURM_CONF" || fail "not the installed prolog: $(cat "$SLURM_CONF")"
  grep -qx "PlugStackConfig=/etc/slurm/plugstack.conf" "$SLURM_CONF" || fail "not Slurm's plugstack.conf"
  [[ ! -e $CLUSTER/bin && ! -e $CLUSTER/state && ! -e $CLUSTER/etc/pilot.conf ]] ||
    fail "the cluster folder holds programs, a state folder or a policy of its own"
  # pilot doctor (pilot(1)), the admin's check in pilot-install(7), on the
  # installed node without --policy: the policy the plugin's line leads to.
  out=$("$PILOT" doctor 2>&1) || fail "pilot doctor on the installed node: $out"
  for p in policy plugstack programs prolog epilog job_submit state key; do
    grep -q "^pilot: doctor: $p: holds: " <<<"$out" || fail "pilot doctor: $p does not hold: $out"
  done
  grep -q "^pilot: doctor: policy: holds: .*$POLICY" <<<"$out" || fail "pilot doctor read another policy: $out"
  # The program imports slurm_pilot: the user's python3 finds none of its
  # own, so a GO shows the installed probe ran (the supervisor puts the
  # installation's share/slurm-pilot/python on PYTHONPATH).
  as_user python3 -c 'import slurm_pilot' 2>/dev/null &&
    fail "python3 imports a slurm_pilot of its own: the pilot would not show the installed probe works"
  diff -r -x __pycache__ "$SRC/python/slurm_pilot" /usr/share/slurm-pilot/python/slurm_pilot >&2 ||
    fail "the installed probe differs from the source's"
  job1=$(go_pilot first)
  verdict_verifies "$job1"
  out=$("$PILOT" grant "$job1" --nodes 1 --duration 10-00:00:00 2>&1) || fail "pilot grant $job1: $out"
  RESV=pilot_$job1
  out=$(as_user "$PILOT" grant --verify "$job1" 2>&1) || fail "grant --verify $job1: $out"
  note "job $job1 GO through the installed files, granted ($((SECONDS - t0)) s)"

  # The upgrade, the cluster running: the keys, verdicts, grants and the
  # edited policy stay as they were, byte for byte.
  snapshot "$TMP/before"
  out=$(dpkg -i "${debs_cur[@]}" 2>&1) || fail "dpkg -i $version over $prev: $out"
  for p in "${PACKAGES[@]}"; do
    [[ $(dpkg-query -W -f='${Version}' "$p") == "$version" ]] || fail "$p: not $version after the upgrade"
  done
  snapshot "$TMP/after"
  diff "$TMP/before" "$TMP/after" >&2 || fail "the upgrade changed the keys, verdicts, grants or policy"
  grep -q '^# Edited on this site.$' "$POLICY" || fail "the upgrade replaced the edited $POLICY"
  [[ ! -e $POLICY.dpkg-new && ! -e $POLICY.dpkg-dist ]] || fail "dpkg left a new copy of $POLICY"
  verdict_verifies "$job1"
  out=$(as_user "$PILOT" grant --verify "$job1" 2>&1) || fail "grant --verify $job1 after the upgrade: $out"
  note "upgraded to $version: keys, verdict and grant unchanged and verified ($((SECONDS - t0)) s)"

  # The upgraded programs pilot too (each job runs the prolog, epilog and
  # supervisor afresh, and its slurmstepd loads the plugin), once the
  # grant's reservation no longer holds the node; its record stays.
  scontrol delete reservation "$RESV" >/dev/null
  RESV=""
  job2=$(go_pilot second)
  verdict_verifies "$job2"
  cmp -s "$STATE/verdicts/$job1.json" "$TMP/copy-$job1.json" || fail "the second pilot changed $job1's verdict"
  "$LOCAL_SLURM" down >/dev/null 2>&1
  note "job $job2 GO after the upgrade ($((SECONDS - t0)) s)"

  # Remove keeps what the site needs to install again; purge removes what
  # the installation made.
  out=$(dpkg -r "${PACKAGES[@]}" 2>&1) || fail "dpkg -r: $out"
  [[ ! -e $PILOT && ! -e /usr/sbin/pilot-prolog ]] || fail "dpkg -r left the programs"
  for p in "${KEYS[@]}" "$STATE/verdicts/$job1.json" "$STATE/grants/$job1.json" "$POLICY"; do
    [[ -e $p ]] || fail "dpkg -r removed $p"
  done
  out=$(dpkg --purge "${PACKAGES[@]}" 2>&1) || fail "dpkg --purge: $out"
  for p in "$ETC" "$STATE" "$LINK" "$SNIPPET" /var/lib/slurm-pilot-node /var/lib/slurm-pilot-controller; do
    [[ ! -e $p && ! -L $p ]] || fail "dpkg --purge left $p"
  done
  TOUCHED=0
  note "removed, then purged ($((SECONDS - t0)) s)"
}

run_case "$@"
