#!/usr/bin/env bash
# Installs Debian's PostgreSQL server for the dev server's dynamic-secret provider and its tests.
# Idempotent like node-deps.sh: when every package is present it only says so; otherwise it runs
# `apt-get update` and installs just the missing ones, without recommends.
#
#   postgresql   the distribution's supported server (15 on bookworm): initdb, postgres, pg_ctl.
#                Tests never use its packaged `main` cluster: they initdb a throwaway one in a
#                temporary directory, run it as `nobody` on a random loopback port and remove it.
#                The package's postinst creates a `postgres` system user and a `main` cluster
#                (not started here: no init system); neither is touched by the tests.
set -euo pipefail

PKGS=(postgresql)

say() { printf '[postgres-deps] %s\n' "$*"; }

if [ "$(id -u)" != 0 ]; then
  say "not root: cannot install ${PKGS[*]}; the PostgreSQL tests will skip" >&2
  exit 0
fi

missing=()
for p in "${PKGS[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
  [ "${status:0:2}" = "ii" ] || missing+=("$p")
done

if [ "${#missing[@]}" = 0 ]; then
  say "all PostgreSQL packages present (${PKGS[*]})"
  exit 0
fi

say "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
say "installed ${missing[*]}"
