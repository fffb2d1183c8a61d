#!/usr/bin/env bash
# Builds the release artefacts of the version in secretferry.__version__ into dist/ (`make release`):
#
#   secretferry-X.Y.Z-py3-none-any.whl   python -m build (the wheel is built from the sdist, which
#   secretferry-X.Y.Z.tar.gz             proves the sdist is complete)
#   secretferry-X.Y.Z.tgz                helm package charts/secretferry
#   secretferry-image-X.Y.Z.oci.tar      the operator image: hack/build-node-images.sh builds the
#                                        unchanged Dockerfile with buildah (or finds it cached by
#                                        content) and the archive is copied, named IMAGE_REPO:X.Y.Z
#   SHA256SUMS                           `sha256sum -c SHA256SUMS` inside dist/ checks them all
#
# The versions must agree first (tests/unit/test_version.py), and the tree must be committed: an
# artefact should be rebuildable from its tag. Where the image cannot be built (not root, buildah
# missing) the script says so and releases the rest; publishing then needs the image built elsewhere.
#
#   release.sh [--skip-image] [--allow-dirty]
#
# Environment: HELM (a helm binary; default: PATH, then the control-plane cache that
# `make control-plane` fills), IMAGE_REPO (default ghcr.io/secretferry/secretferry, the chart's
# image.repository), SECRETFERRY_CACHE (as in build-node-images.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=hack/lib/oci.sh
source hack/lib/oci.sh   # oci_set_ref_name, oci_tar

PY=.venv/bin/python
DIST=dist
IMAGE_REPO="${IMAGE_REPO:-ghcr.io/secretferry/secretferry}"
CACHE_ROOT="${SECRETFERRY_CACHE:-$HOME/.cache/secretferry}"

say() { printf '[release] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

skip_image="" allow_dirty=""
while [ $# -gt 0 ]; do
  case "$1" in
    --skip-image) skip_image=1 ;;
    --allow-dirty) allow_dirty=1 ;;
    -h|--help) sed -n '2,20s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (try --help)" ;;
  esac
  shift
done

[ -x "$PY" ] || die "$PY not found; run 'make setup' first"
"$PY" -c 'import build' 2>/dev/null || die "the 'build' package is missing; run 'make setup' (dev extra)"

version=$("$PY" -c 'import secretferry; print(secretferry.__version__)')
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
say "secretferry $version at $commit"

say "checking that every version agrees (tests/unit/test_version.py)"
"$PY" -m pytest -q -p no:cacheprovider tests/unit/test_version.py >/dev/null \
  || die "versions disagree: .venv/bin/pytest -q tests/unit/test_version.py says where"

if [ -n "$(git status --porcelain 2>/dev/null)" ]; then
  [ -n "$allow_dirty" ] || die "uncommitted changes (git status); commit first, or --allow-dirty for a trial run"
  say "warning: uncommitted changes; these artefacts are not the commit $commit"
fi

helm_bin() {
  if [ -n "${HELM:-}" ]; then echo "$HELM"; return; fi
  command -v helm 2>/dev/null && return
  # The newest control-plane cache (hack/build-control-plane.sh puts helm there).
  ls -1t "$CACHE_ROOT"/control-plane-*/bin/helm 2>/dev/null | head -n 1 || true
}
HELM_BIN=$(helm_bin)
[ -n "$HELM_BIN" ] && [ -x "$HELM_BIN" ] \
  || die "helm not found: run 'make control-plane' (it caches helm), or set HELM=/path/to/helm"

rm -rf "$DIST"
mkdir -p "$DIST"

say "python -m build: sdist, then the wheel from it"
"$PY" -m build --outdir "$DIST" . > "$DIST/.build.log" 2>&1 \
  || { tail -n 30 "$DIST/.build.log" >&2; die "python -m build failed (log: $DIST/.build.log)"; }
rm -f "$DIST/.build.log"
[ -f "$DIST/secretferry-$version-py3-none-any.whl" ] && [ -f "$DIST/secretferry-$version.tar.gz" ] \
  || die "expected secretferry-$version wheel and sdist in $DIST/, found: $(ls "$DIST")"

say "helm package charts/secretferry ($("$HELM_BIN" version --short 2>/dev/null))"
"$HELM_BIN" lint --quiet charts/secretferry >&2
"$HELM_BIN" package charts/secretferry --destination "$DIST" >/dev/null
[ -f "$DIST/secretferry-$version.tgz" ] || die "helm package did not write $DIST/secretferry-$version.tgz"

# The image: build-node-images.sh prints `secretferry=<archive>` (cached by the content of what the
# Dockerfile copies, so an unchanged tree costs only hashing). The copy is renamed inside to
# IMAGE_REPO:version, so `podman load`/`ctr images import`/`skopeo copy` know it by that name.
image_note=""
if [ -n "$skip_image" ]; then
  image_note="skipped (--skip-image)"
else
  say "operator image: hack/build-node-images.sh --only secretferry (minutes when not cached)"
  if out=$(bash hack/build-node-images.sh --only secretferry); then
    archive=$(sed -n 's/^secretferry=//p' <<< "$out")
    [ -f "$archive" ] || die "build-node-images.sh named no archive: $out"
    work=$(mktemp -d) && chmod 755 "$work"
    trap 'rm -rf "$work"' EXIT
    tar -C "$work" -xf "$archive"
    oci_set_ref_name "$work" "$IMAGE_REPO:$version" "$PY"
    oci_tar "$work" "$DIST/secretferry-image-$version.oci.tar"
    image_note="$IMAGE_REPO:$version"
  elif [ "$(id -u)" != 0 ] || ! command -v buildah >/dev/null; then
    # Not this script's failure: the machine cannot build images (see `make node-deps`).
    image_note="NOT BUILT: this machine cannot build it (needs root and buildah: make node-deps)"
    root=$([ "$(id -u)" = 0 ] && echo yes || echo no)
    buildah=$(command -v buildah >/dev/null && echo yes || echo no)
    say "the operator image cannot be built here (root: $root, buildah: $buildah); releasing the rest without it"
  else
    die "the operator image build failed (see above)"
  fi
fi

(
  cd "$DIST"
  find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%f\n' | LC_ALL=C sort | xargs -d '\n' sha256sum -- > SHA256SUMS
)

say "dist/ for secretferry $version ($commit); image: $image_note"
(cd "$DIST" && stat -c '  %10s  %n' -- *) >&2
