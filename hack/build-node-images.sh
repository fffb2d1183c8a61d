#!/usr/bin/env bash
# Builds the images the local node runs, as OCI archives ready for `ctr -n k8s.io images import`,
# without Docker and without a registry (only package registries are reachable here):
#
#   pause        localhost/pause:local              pause.c from the k8s.io/kubernetes Go module, gcc -static
#   busybox      localhost/busybox:local            /bin/busybox of busybox-static plus its applet links
#   python-base  localhost/debian-python:bookworm   debootstrap minbase + python3 (stands in for python:3.11-slim)
#   secretferry  localhost/secretferry:dev          the repo's unchanged Dockerfile, `buildah bud` on python-base
#
# Every archive is named after a key over its inputs and cached under
# ${SECRETFERRY_CACHE:-~/.cache/secretferry}/images/, so a second run only hashes and prints paths.
# stdout: one `name=path` line per image; everything else goes to stderr.
#
# Several clones may run this at once on one machine: each image has its own flock, buildah's storage
# (under the cache dir) has one more, outputs are written to unique temporary names and renamed into
# place. buildah and debootstrap run in a private mount namespace, so their mounts disappear with
# them even when the script is killed; buildah builds with --network host (no bridge, no iptables).
#
#   build-node-images.sh                       all four
#   build-node-images.sh --only secretferry    one (repeat --only, or give a comma list, for several)
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.34.4}"
SUITE="${DEBIAN_SUITE:-bookworm}"
BASE_PACKAGES="python3,python3-venv,python3-pip,python-is-python3,ca-certificates"
# Bump when the way an image is put together changes, so the cached archives are rebuilt.
PACK_VERSION=1
BASE_SCRIPT_VERSION=1
KEEP_ARCHIVES=3   # per image; older archives (from older sources) are removed after a build

PAUSE_REF=localhost/pause:local
BUSYBOX_REF=localhost/busybox:local
BASE_REF="localhost/debian-python:$SUITE"
SF_REF=localhost/secretferry:dev

PYTHON_BASE_KEY="" PYTHON_BASE_TAR=""
SELF="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
REPO="$(cd "$(dirname "$SELF")/.." && pwd)"
CACHE_ROOT="${SECRETFERRY_CACHE:-$HOME/.cache/secretferry}"
IMG="$CACHE_ROOT/images"
BUILDAH_ROOT="$CACHE_ROOT/buildah/storage"
# shellcheck source=hack/lib/oci.sh
source "$REPO/hack/lib/oci.sh"   # oci_set_ref_name, oci_tar

say() { printf '[images] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
sha() { sha256sum | cut -c1-16; }

need_root() {
  [ "$(id -u)" = 0 ] || die "building $1 needs root (umoci/debootstrap/buildah); re-run as root"
}
need_cmd() {
  local c
  for c in "$@"; do
    command -v "$c" >/dev/null || die "'$c' not found; run 'make node-deps' first"
  done
}

# lock FILE: take an exclusive flock on FILE; sets LOCK_FD. Waiting is announced once.
lock() {
  exec {LOCK_FD}>"$1"
  if ! flock -n "$LOCK_FD"; then
    say "another build holds $1; waiting for it"
    flock "$LOCK_FD"
  fi
}

# prune NAME KEEP_PATH: keep the newest $KEEP_ARCHIVES archives of NAME (KEEP_PATH always).
prune() {
  local name="$1" keep="$2" f n=0
  while IFS= read -r f; do
    n=$((n + 1))
    [ "$n" -le "$KEEP_ARCHIVES" ] || [ "$f" = "$keep" ] || rm -f -- "$f"
  done < <(ls -1t "$IMG/$name"-*.tar 2>/dev/null)
}

# pack_rootfs ROOTFS REF OUT [umoci config options...]: one-layer OCI archive with umoci.
pack_rootfs() {
  local rootfs="$1" ref="$2" out="$3"; shift 3
  local work; work=$(mktemp -d "$IMG/.work.XXXXXX"); CLEANUP+=("$work")
  local epoch=1970-01-01T00:00:00Z
  umoci init --layout "$work/oci"
  umoci new --image "$work/oci:img"
  umoci unpack --image "$work/oci:img" "$work/bundle" >/dev/null
  cp -a "$rootfs/." "$work/bundle/rootfs/"
  umoci repack --image "$work/oci:img" --history.created "$epoch" "$work/bundle"
  umoci config --image "$work/oci:img" --created "$epoch" --no-history \
    --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
  umoci gc --layout "$work/oci"
  oci_set_ref_name "$work/oci" "$ref"
  local tmp; tmp=$(mktemp "$IMG/.$(basename "$out").XXXXXX"); CLEANUP+=("$tmp")
  oci_tar "$work/oci" "$tmp"
  chmod 644 "$tmp" && mv -f "$tmp" "$out"
  rm -rf --one-file-system "$work"
}

# ---------------------------------------------------------------------------------------------
# pause: the sandbox image. busybox cannot stand in (its sh exits, and the pod's namespaces with it).
pause_c() {
  local modcache dir
  modcache=$(go env GOMODCACHE)
  dir="$modcache/k8s.io/kubernetes@$K8S_VERSION"
  if [ ! -f "$dir/build/pause/linux/pause.c" ]; then
    say "pause: downloading k8s.io/kubernetes@$K8S_VERSION from the Go module proxy (for pause.c)"
    local tmp; tmp=$(mktemp -d)
    dir=$(cd "$tmp" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" \
      | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
    rm -rf "$tmp"
  fi
  [ -f "$dir/build/pause/linux/pause.c" ] || die "pause.c not found in k8s.io/kubernetes@$K8S_VERSION"
  echo "$dir/build/pause/linux/pause.c"
}

image_pause() {
  need_cmd go sha256sum
  local src key out
  src=$(pause_c)
  key=$( { echo "pause $K8S_VERSION pack=$PACK_VERSION"; sha256sum < "$src"; } | sha)
  out="$IMG/pause-$K8S_VERSION-$key.tar"
  if [ ! -f "$out" ]; then
    lock "$IMG/.pause.lock"
    if [ ! -f "$out" ]; then
      need_root pause; need_cmd gcc umoci
      say "building pause image (gcc -static pause.c from k8s.io/kubernetes@$K8S_VERSION, ~1 s)"
      local work; work=$(mktemp -d "$IMG/.work.XXXXXX"); CLEANUP+=("$work")
      mkdir -p "$work/rootfs"
      gcc -Os -static -DVERSION=v3.10-secretferry -o "$work/rootfs/pause" "$src"
      strip "$work/rootfs/pause" 2>/dev/null || true
      pack_rootfs "$work/rootfs" "$PAUSE_REF" "$out" \
        --config.entrypoint /pause --config.user 65535:65535
      rm -rf --one-file-system "$work"
      prune pause "$out"
    fi
    exec {LOCK_FD}>&-
  fi
  touch "$out"
  echo "pause=$out"
}

# ---------------------------------------------------------------------------------------------
image_busybox() {
  local ver key out
  ver=$(dpkg-query -W -f='${Version}' busybox-static 2>/dev/null) \
    || die "busybox-static is not installed; run 'make node-deps' first"
  key=$(echo "busybox-static $ver pack=$PACK_VERSION" | sha)
  out="$IMG/busybox-$key.tar"
  if [ ! -f "$out" ]; then
    lock "$IMG/.busybox.lock"
    if [ ! -f "$out" ]; then
      need_root busybox; need_cmd umoci
      say "building busybox image (busybox-static $ver, ~1 s)"
      local work r; work=$(mktemp -d "$IMG/.work.XXXXXX"); CLEANUP+=("$work"); r="$work/rootfs"
      mkdir -p "$r/bin" "$r/etc" "$r/root" "$r/tmp" "$r/proc" "$r/sys" "$r/dev"
      chmod 1777 "$r/tmp"; chmod 700 "$r/root"
      cp /bin/busybox "$r/bin/busybox"
      local applet
      while IFS= read -r applet; do
        [ "$applet" = bin/busybox ] && continue
        mkdir -p "$r/$(dirname "$applet")"
        ln -sf /bin/busybox "$r/$applet"
      done < <(/bin/busybox --list-full)
      printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' > "$r/etc/passwd"
      printf 'root:x:0:\nnogroup:x:65534:\n' > "$r/etc/group"
      pack_rootfs "$r" "$BUSYBOX_REF" "$out" --config.cmd /bin/sh
      rm -rf --one-file-system "$work"
      prune busybox "$out"
    fi
    exec {LOCK_FD}>&-
  fi
  touch "$out"
  echo "busybox=$out"
}

# ---------------------------------------------------------------------------------------------
# The Debian mirror apt already uses for $SUITE (deb822 .sources first, then sources.list).
debian_mirror() {
  [ -n "${DEBIAN_MIRROR:-}" ] && { echo "$DEBIAN_MIRROR"; return; }
  python3 - "$SUITE" <<'PY'
import glob, sys
suite = sys.argv[1]
def deb822(path):
    stanza = {}
    for line in open(path, encoding="utf-8", errors="replace").read().splitlines() + [""]:
        if not line.strip():
            if stanza:
                yield stanza
            stanza = {}
        elif line.startswith("#"):
            continue
        elif line[0] in " \t" and stanza:
            continue  # continuation line (e.g. an inline key); not needed here
        elif ":" in line:
            k, v = line.split(":", 1)
            stanza[k.strip().lower()] = v.strip()
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for s in deb822(path):
        if s.get("enabled", "yes").lower() == "no" or "deb" not in s.get("types", "").split():
            continue
        if suite in s.get("suites", "").split() and s.get("uris"):
            print(s["uris"].split()[0]); sys.exit(0)
for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
    try:
        lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    except OSError:
        continue
    for line in lines:
        words = line.split("#", 1)[0].split()
        if not words or words[0] != "deb":
            continue
        words = words[1:]
        if words and words[0].startswith("["):
            while words and not words[0].endswith("]"):
                words = words[1:]
            words = words[1:]
        if len(words) >= 2 and words[1] == suite:
            print(words[0]); sys.exit(0)
sys.exit(f"no 'deb' source for suite {suite} in /etc/apt; set DEBIAN_MIRROR")
PY
}

base_key() {
  echo "base $SUITE $BASE_PACKAGES script=$BASE_SCRIPT_VERSION arch=$(dpkg --print-architecture)" | sha
}

# Runs inside `unshare --mount`: debootstrap, import the rootfs with buildah, push an OCI archive.
ns_build_base() {
  local key="$1" out="$2" mirror="$3"
  buildah_env
  NS_WORK=$(mktemp -d "$IMG/.work.XXXXXX"); CLEANUP+=("$NS_WORK")
  local r="$NS_WORK/rootfs"
  local t0=$SECONDS
  if ! debootstrap --variant=minbase --include="$BASE_PACKAGES" "$SUITE" "$r" "$mirror" \
      > "$NS_WORK/debootstrap.log" 2>&1; then
    tail -n 30 "$NS_WORK/debootstrap.log" >&2
    [ -f "$r/debootstrap/debootstrap.log" ] && tail -n 30 "$r/debootstrap/debootstrap.log" >&2
    die "debootstrap failed"
  fi
  say "python-base: debootstrap took $((SECONDS - t0)) s; importing into buildah"
  # debootstrap unmounts its /proc (and /sys) itself; never trim through a mount that is left.
  no_mounts_under "$NS_WORK" || die "mounts left under $NS_WORK after debootstrap; not trimming"
  # Trim what an image does not need, and what debootstrap copied from this host.
  rm -rf "$r"/var/cache/apt/* "$r"/var/lib/apt/lists/* "$r"/usr/share/doc/* "$r"/usr/share/man/* \
    "$r"/usr/share/info/* "$r"/var/log/* "$r"/etc/resolv.conf "$r"/etc/hostname
  [ -d "$r/usr/share/locale" ] \
    && find "$r/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
  find "$r/dev" -xdev -mindepth 1 -delete   # the runtime provides /dev
  buildah_lock
  local c m
  c=$(bx from --quiet scratch)
  m=$(bx mount "$c")
  cp -a "$r/." "$m/"
  bx config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd python3 "$c"
  bx commit --quiet --rm "$c" "localhost/debian-python:$key" >/dev/null
  bx tag "localhost/debian-python:$key" "$BASE_REF"
  say "python-base: writing the OCI archive"
  local tmp; tmp=$(mktemp "$IMG/.$(basename "$out").XXXXXX"); CLEANUP+=("$tmp")
  bx push --quiet "localhost/debian-python:$key" "oci-archive:$tmp:$BASE_REF"
  chmod 644 "$tmp" && mv -f "$tmp" "$out"
}

image_python_base() {
  local key out
  key=$(base_key)
  out="$IMG/debian-python-$SUITE-$key.tar"
  if [ ! -f "$out" ]; then
    lock "$IMG/.python-base.lock"
    if [ ! -f "$out" ]; then
      need_root python-base; need_cmd debootstrap buildah runc
      local mirror; mirror=$(debian_mirror) || die "cannot find the Debian mirror in /etc/apt"
      say "building python-base image (debootstrap $SUITE from $mirror, ~60 s)"
      local t0=$SECONDS
      unshare --mount --propagation private -- bash "$SELF" --_ns ns_build_base "$key" "$out" "$mirror"
      say "python-base: built in $((SECONDS - t0)) s"
      prune debian-python-"$SUITE" "$out"
    fi
    exec {LOCK_FD}>&-
  fi
  touch "$out"
  PYTHON_BASE_KEY="$key"; PYTHON_BASE_TAR="$out"
  echo "python-base=$out"
}

# ---------------------------------------------------------------------------------------------
# secretferry: key over exactly what the Dockerfile copies (plus the base image).
sf_key() {
  local dir="$1"
  (
    cd "$dir"
    { echo "base=$PYTHON_BASE_KEY"
      { printf '%s\0' Dockerfile pyproject.toml README.md
        find operator -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 | LC_ALL=C sort -z
      } | xargs -0 sha256sum
    } | sha
  )
}

ns_build_secretferry() {
  local ctx="$1" out="$2" base_key="$3" base_tar="$4"
  buildah_env
  buildah_lock
  # The base must be in buildah's storage under the name the Dockerfile's FROM uses.
  if ! bx inspect --type image "localhost/debian-python:$base_key" >/dev/null 2>&1; then
    say "secretferry: loading python-base into buildah storage"
    local id; id=$(bx pull --quiet "oci-archive:$base_tar")
    bx tag "$id" "localhost/debian-python:$base_key"
  fi
  bx tag "localhost/debian-python:$base_key" "$BASE_REF"
  local vols=()
  [ -f /etc/ssl/certs/ca-certificates.crt ] \
    && vols+=(-v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro)
  [ -f /etc/pip.conf ] && vols+=(-v /etc/pip.conf:/etc/pip.conf:ro)
  # The build log, each line prefixed with the seconds since the start of the build.
  local log="$IMG/.secretferry-build.log" t0=$SECONDS line
  if ! bx bud --network host --isolation oci --pull=never \
    --runtime "$(command -v runc)" --runtime-flag "root=$BUILDAH_RUNROOT/runc" \
    --build-arg "PYTHON_IMAGE=$BASE_REF" ${vols[@]+"${vols[@]}"} \
    --iidfile "$ctx/.iid" -t "$SF_REF" -f "$ctx/Dockerfile" "$ctx" 2>&1 \
    | while IFS= read -r line; do printf '%4d %s\n' $((SECONDS - t0)) "$line"; done > "$log"; then
    tail -n 40 "$log" >&2
    die "buildah bud failed (full log: $log)"
  fi
  say "secretferry: buildah bud took $((SECONDS - t0)) s; writing the OCI archive"
  local tmp; tmp=$(mktemp "$IMG/.$(basename "$out").XXXXXX"); CLEANUP+=("$tmp")
  bx push --quiet "$(cat "$ctx/.iid")" "oci-archive:$tmp:$SF_REF"
  chmod 644 "$tmp" && mv -f "$tmp" "$out"
  # Keep storage small: drop images no tag points to any more (older builds, build stages).
  bx rmi --prune >/dev/null 2>&1 || true
}

image_secretferry() {
  [ -n "${PYTHON_BASE_KEY:-}" ] || image_python_base >/dev/null
  local key out
  key=$(sf_key "$REPO")
  out="$IMG/secretferry-$key.tar"
  if [ ! -f "$out" ]; then
    lock "$IMG/.secretferry.lock"
    if [ ! -f "$out" ]; then
      need_root secretferry; need_cmd buildah runc
      # Build from a snapshot of what the Dockerfile copies, and name the archive after the
      # snapshot, so an edit during the build cannot end up under the wrong key.
      local ctx; ctx=$(mktemp -d "$IMG/.work.XXXXXX"); CLEANUP+=("$ctx")
      cp "$REPO/Dockerfile" "$REPO/pyproject.toml" "$REPO/README.md" "$ctx/"
      cp -a "$REPO/operator" "$ctx/"
      find "$ctx/operator" -name __pycache__ -type d -prune -exec rm -rf {} +
      find "$ctx/operator" -name '*.pyc' -delete
      key=$(sf_key "$ctx")
      out="$IMG/secretferry-$key.tar"
      if [ ! -f "$out" ]; then
        say "building secretferry image (Dockerfile on $BASE_REF, ~30 s)"
        local t0=$SECONDS
        unshare --mount --propagation private -- bash "$SELF" --_ns ns_build_secretferry \
          "$ctx" "$out" "$PYTHON_BASE_KEY" "$PYTHON_BASE_TAR"
        say "secretferry: built in $((SECONDS - t0)) s"
        prune secretferry "$out"
      fi
      rm -rf --one-file-system "$ctx"
    fi
    exec {LOCK_FD}>&-
  fi
  touch "$out"
  echo "secretferry=$out"
}

# ---------------------------------------------------------------------------------------------
# buildah with its storage under the cache dir and a throwaway runroot under /run.
buildah_env() {
  mkdir -p "$BUILDAH_ROOT"
  BUILDAH_RUNROOT=$(mktemp -d /run/secretferry-buildah.XXXXXX)
}
bx() {
  buildah --root "$BUILDAH_ROOT" --runroot "$BUILDAH_RUNROOT" --storage-driver overlay \
    --cgroup-manager cgroupfs "$@"
}
# One user of the storage at a time; only the holder may remove "all" working containers.
buildah_lock() {
  lock "$CACHE_ROOT/buildah/.lock"
  BUILDAH_LOCKED=1
}
buildah_cleanup() {
  [ -n "${BUILDAH_RUNROOT:-}" ] || return 0
  if [ -n "${BUILDAH_LOCKED:-}" ]; then
    bx rm --all >/dev/null 2>&1 || true
    bx umount --all >/dev/null 2>&1 || true
  fi
  rm -rf --one-file-system "$BUILDAH_RUNROOT"
}
# no_mounts_under DIR: true when nothing is mounted at or below DIR (in this mount namespace).
no_mounts_under() {
  local d; d=$(realpath "$1")
  ! awk -v d="$d" '$5 == d || index($5, d "/") == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo
}

# Temporary files and directories of this process, removed on exit however it ends (a name that
# was renamed into place no longer exists). Plus the empty state directories that buildah
# (/run/containers/networks), runc (/run/runc) and mount(8) (/run/mount) create, when they
# were not there before.
CLEANUP=()
RUN_DIRS=()
cleanup() {
  local p
  for p in ${CLEANUP[@]+"${CLEANUP[@]}"}; do
    [ -e "$p" ] || continue
    if no_mounts_under "$p"; then rm -rf --one-file-system "$p"; else say "left $p: something is mounted there"; fi
  done
  for p in ${RUN_DIRS[@]+"${RUN_DIRS[@]}"}; do rmdir "$p" 2>/dev/null || true; done
}

# ---------------------------------------------------------------------------------------------
if [ "${1:-}" = "--_ns" ]; then   # internal: run one build step inside the private mount namespace
  shift
  trap 'buildah_cleanup; cleanup' EXIT
  "$@"
  exit 0
fi

for d in /run/containers/networks /run/containers /run/runc /run/mount; do [ -e "$d" ] || RUN_DIRS+=("$d"); done
trap cleanup EXIT

usage() { sed -n '2,20s/^# \{0,1\}//p' "$SELF"; }
ALL=(pause busybox python-base secretferry)
want=()
while [ $# -gt 0 ]; do
  case "$1" in
    --only) [ $# -ge 2 ] || die "--only needs a name (${ALL[*]})"; IFS=, read -ra more <<< "$2"; want+=("${more[@]}"); shift 2 ;;
    --only=*) IFS=, read -ra more <<< "${1#--only=}"; want+=("${more[@]}"); shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (try --help)" ;;
  esac
done
[ "${#want[@]}" -gt 0 ] || want=("${ALL[@]}")

mkdir -p "$IMG" "$CACHE_ROOT/buildah"
# Leftovers of a killed run (temporary archives, work dirs) older than a day.
find "$IMG" -mindepth 1 -maxdepth 1 \( -name '.work.*' -o -name '.*.tar.*' \) -mmin +1440 \
  -exec rm -rf --one-file-system {} + 2>/dev/null || true

for w in "${want[@]}"; do
  case "$w" in
    pause) image_pause ;;
    busybox) image_busybox ;;
    python-base|base) image_python_base ;;
    secretferry) image_secretferry ;;
    *) die "unknown image '$w' (${ALL[*]})" ;;
  esac
done
