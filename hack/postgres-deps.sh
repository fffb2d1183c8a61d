#!/usr/bin/env bash
# Installs Debian's PostgreSQL server for the dev server's dynamic-secret provider and its tests,
# through apt-install.sh (idempotent: when every package is present it only says so).
#
#   postgresql   the distribution's supported server (15 on bookworm): initdb, postgres, pg_ctl.
#                Tests never use its packaged `main` cluster: they initdb a throwaway one in a
#                temporary directory, run it as `nobody` on a random loopback port and remove it.
#                The package's postinst creates a `postgres` system user and a `main` cluster
#                (not started here: no init system); neither is touched by the tests.
set -euo pipefail

exec bash "$(dirname "$0")/apt-install.sh" postgres-deps "PostgreSQL packages" "the PostgreSQL tests will skip" \
  postgresql
