#!/usr/bin/env bash
# Installs Debian packages for a make target that needs apt (node-deps.sh, postgres-deps.sh), so
# that every such target behaves the same:
#   - says what it checks and, when something is missing, what it installs;
#   - installs only the missing packages (dpkg status "ii" counts as present), without recommends;
#   - runs `apt-get update` only when needed: when a missing package has no install candidate in the
#     current lists, or when installing from them fails (stale lists: the mirror moved on). When
#     every package is present it touches nothing at all.
#   - without root it says what it cannot install and exits 0: not an error, the caller's tests
#     and tools skip or fall back (the NOTE says how).
#
# Usage: apt-install.sh TAG WHAT NOTE PKG...
#   TAG   prefix of every line, e.g. node-deps          WHAT  e.g. "node packages"
#   NOTE  said after "not root: cannot install PKG...;", e.g. "the PostgreSQL tests will skip"
set -euo pipefail

if [ "$#" -lt 4 ]; then
  echo "usage: $0 TAG WHAT NOTE PKG..." >&2
  exit 2
fi
TAG=$1 WHAT=$2 NOTE=$3
shift 3
PKGS=("$@")

say() { printf '[%s] %s\n' "$TAG" "$*"; }

if [ "$(id -u)" != 0 ]; then
  say "not root: cannot install ${PKGS[*]}; $NOTE" >&2
  exit 0
fi

missing=()
for p in "${PKGS[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
  [ "${status:0:2}" = "ii" ] || missing+=("$p")
done

if [ "${#missing[@]}" = 0 ]; then
  say "all $WHAT present (${PKGS[*]})"
  exit 0
fi

say "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive

# A package apt has never heard of (empty or old lists) shows "Candidate: (none)" or nothing.
have_candidates() {
  local p cand
  for p in "$@"; do
    cand=$(apt-cache policy "$p" 2>/dev/null | sed -n 's/^ *Candidate: *//p')
    [ -n "$cand" ] && [ "$cand" != "(none)" ] || return 1
  done
}

install() { apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }

if ! have_candidates "${missing[@]}"; then
  apt-get update -qq
  install
elif ! install; then
  say "install from the current package lists failed; updating them and trying again"
  apt-get update -qq
  install
fi
say "installed ${missing[*]}"
