#!/usr/bin/env bash
# Builds one of our small Go test tools (hack/luacheck, hack/kstatus) and prints the binary's path.
#
# The binary lives outside the repo, in the cache the control plane uses, under a directory named
# by the hash of the tool's sources (go.mod, go.sum, *.go) and the Go version: a second run is a
# no-op, and an edited tool gets a new binary instead of a stale one. Modules come from the Go
# module proxy (go.sum pins them). The output is written to a temporary name and renamed into
# place, so several clones sharing the cache see a whole binary or none.
#
#   build-go-tool.sh hack/luacheck     ->  ~/.cache/secretferry/go-tools/luacheck-<hash>/luacheck
set -euo pipefail
cd "$(dirname "$0")/.."
src="${1:?usage: build-go-tool.sh hack/<tool>}"
name="$(basename "$src")"
command -v go >/dev/null || { echo "build-go-tool: go is not installed" >&2; exit 3; }
CACHE_ROOT="${SECRETFERRY_CACHE:-$HOME/.cache/secretferry}"
key=$( { go version; cat "$src"/go.mod "$src"/go.sum "$src"/*.go; } | sha256sum | cut -c1-16)
dir="$CACHE_ROOT/go-tools/$name-$key"
if [ ! -x "$dir/$name" ]; then
  mkdir -p "$dir"
  tmp=$(mktemp "$dir/.$name.XXXXXX")
  (cd "$src" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags "-s -w" -o "$tmp" .)
  chmod 755 "$tmp" && mv -f "$tmp" "$dir/$name"
  echo "build-go-tool: built $dir/$name" >&2
fi
echo "$dir/$name"
