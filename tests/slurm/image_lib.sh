# Images for the container cases (container.sh, multinode.sh): a local
# docker-registry, images built here from Debian's files and pushed to it,
# and the site's podman settings. Sourced after lib.sh, with REG
# (ADDRESS:PORT the registry listens on and jobs pull from), PORT and
# ROOTDIR (root's folder for the registry, podman's stores and config) set.

# podman's stores and ROOTDIR removed (containers and images first: a
# store holds mounts). Never fails: what it cannot remove is said, and the
# rest of the cleanup (the registry) still runs.
image_cleanup() {
  local store
  for store in "$ROOTDIR/build" "$ROOTDIR/cache"; do
    if [[ -d $store ]]; then
      CONTAINERS_CONF=$ROOTDIR/containers.conf podman --root "$store" rm -af -t 0 >/dev/null 2>&1 || true
      podman --root "$store" rmi -af >/dev/null 2>&1 || true
    fi
  done
  rm -rf "$ROOTDIR" 2>/dev/null || note "$ROOTDIR not removed: $(mount | grep -c "$ROOTDIR") mounts left"
}

start_registry() {
  # SO_REUSEADDR: a listener makes it busy, the last run's closed
  # connections (TIME_WAIT) do not.
  python3 -c "import socket; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('${REG%:*}',$PORT)); s.listen()" 2>/dev/null ||
    fail "port $PORT is busy (the policy's insecure registry)"
  cat >"$ROOTDIR/registry.yml" <<YML
version: 0.1
storage:
  filesystem:
    rootdirectory: $ROOTDIR/registry
http:
  addr: $REG
YML
  /usr/bin/docker-registry serve "$ROOTDIR/registry.yml" >"$ROOTDIR/registry.log" 2>&1 &
  BACKGROUND+=($!)
  local i
  for ((i = 0; i < 50; i++)); do
    curl -fs "http://$REG/v2/" >/dev/null && return
    sleep 0.2
  done
  fail "docker-registry did not start: $(cat "$ROOTDIR/registry.log")"
}

# A checkpoint the programs save as their own: torch.save of a model and its
# AdamW state after one step, made once with the node's torch.
make_state() {
  if [[ ! -f $ROOTDIR/state.pt ]]; then
    /usr/bin/python3 -c 'import sys, torch
torch.manual_seed(0)
m = torch.nn.Linear(4, 2)
o = torch.optim.AdamW(m.parameters())
m(torch.ones(1, 4)).sum().backward()
o.step()
torch.save({"model": m.state_dict(), "optimizer": o.state_dict()}, sys.argv[1])' "$ROOTDIR/state.pt" ||
      fail "cannot make the checkpoint with the node's torch"
  fi
}

# Builds the image (busybox and a file only it has, holding MARK) and
# pushes it; prints the manifest's digest as the registry serves it.
push_image() {  # push_image REPO:TAG [MARK]
  local root=$ROOTDIR/rootfs
  mkdir -p "$root/bin" "$root/etc" "$root/tmp"
  cp /bin/busybox "$root/bin/busybox"
  ln -sf busybox "$root/bin/sh"
  local tool
  for tool in cat grep sed tr ls; do ln -sf busybox "$root/bin/$tool"; done
  echo "${2:-inside-the-image}" >"$root/etc/pilot-image"
  make_state
  mkdir -p "$root/ckpt"
  cp "$ROOTDIR/state.pt" "$root/ckpt/state.pt"
  push_root "$root" "$1"
}

# An image of Debian's python3 without torch: the interpreter, the shared
# libraries it and its compiled modules load, its standard library, and a
# distribution only the image has (pilot-image-marker 3.1.4); the same
# file and checkpoint as push_image's. Prints the manifest's digest.
push_python_image() {  # push_python_image REPO:TAG
  local root=$ROOTDIR/pyroot lib
  mkdir -p "$root/usr/bin" "$root/etc" "$root/tmp" "$root/ckpt" \
    "$root/usr/lib/python3/dist-packages/pilot_image_marker-3.1.4.dist-info"
  cp /usr/bin/python3.11 "$root/usr/bin/python3.11"
  ln -sf python3.11 "$root/usr/bin/python3"
  tar -C / --exclude=__pycache__ --exclude='usr/lib/python3.11/test' \
    --exclude='usr/lib/python3.11/config-*' --exclude='usr/lib/python3.11/idlelib' \
    --exclude='usr/lib/python3.11/tkinter' --exclude='usr/lib/python3.11/ensurepip' \
    --exclude='usr/lib/python3.11/lib2to3' --exclude='usr/lib/python3.11/pydoc_data' \
    --exclude='usr/lib/python3.11/dist-packages' \
    -cf - usr/lib/python3.11 | tar -C "$root" -xf -
  # (The loader's own line, /lib64/ld-linux-x86-64.so.2, is one of them.)
  for lib in $(ldd /usr/bin/python3.11 /usr/lib/python3.11/lib-dynload/*.so 2>/dev/null |
    sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) .*/\1/p' | sort -u); do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
  printf 'Metadata-Version: 2.1\nName: pilot-image-marker\nVersion: 3.1.4\n' \
    >"$root/usr/lib/python3/dist-packages/pilot_image_marker-3.1.4.dist-info/METADATA"
  echo "inside-the-python-image" >"$root/etc/pilot-image"
  make_state
  cp "$ROOTDIR/state.pt" "$root/ckpt/state.pt"
  push_root "$root" "$1"
}

push_root() {  # push_root ROOTFS REPO:TAG: prints the manifest's digest
  tar -C "$1" -cf "$ROOTDIR/rootfs.tar" .
  shift
  podman --root "$ROOTDIR/build" import "$ROOTDIR/rootfs.tar" "localhost/$1" >/dev/null 2>&1 ||
    fail "podman import of $1 failed"
  podman --root "$ROOTDIR/build" push --tls-verify=false "localhost/$1" "$REG/$1" >/dev/null 2>&1 ||
    fail "podman push to $REG failed"
  curl -fsI -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
    "http://$REG/v2/${1%%:*}/manifests/${1##*:}" | tr -d '\r' |
    sed -n 's/^[Dd]ocker-[Cc]ontent-[Dd]igest: //p'
}

# The site's side: podman allowed, its containers.conf (spank_pilot(8)).
allow_podman() {
  printf '[containers]\ndefault_ulimits = []\n[engine]\nruntime = "runc"\n' >"$ROOTDIR/containers.conf"
  cat >>"$POLICY" <<EOF

[container]
allowed_runtimes = ["none", "podman"]
podman_args = ["--tls-verify=false"]
containers_conf = "$ROOTDIR/containers.conf"
image_cache = "$ROOTDIR/cache"
EOF
}

