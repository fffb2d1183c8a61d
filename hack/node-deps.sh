#!/usr/bin/env bash
# Installs the Debian packages the local node (containerd + kubelet) and its images need.
# Idempotent: when every package is present it only says so; otherwise it runs `apt-get update`
# and installs just the missing ones, without recommends.
#
#   containerd runc       the node's container runtime (crun fails on this kind of machine: cgroup v1 hybrid)
#   umoci busybox-static  the pause and busybox images, packed without a registry
#   debootstrap           the Debian python base image that replaces python:3.11-slim-bookworm
#   buildah               builds the project's unchanged Dockerfile (no Docker here)
#   gcc libc6-dev         compile the pause binary from the kubernetes module's pause.c
#   netavark              buildah -> golang-github-containers-common needs a "container-network-stack";
#                         without naming one apt picks containernetworking-plugins, which pulls in
#                         iptables. netavark satisfies it with no dependencies, and the image build
#                         runs with --network host, so neither is ever used.
set -euo pipefail

PKGS=(containerd runc umoci busybox-static debootstrap buildah gcc libc6-dev netavark)

say() { printf '[node-deps] %s\n' "$*"; }

if [ "$(id -u)" != 0 ]; then
  # Not an error: without root there is no local node anyway; the demo and the tests say so and
  # run the operator as a local process instead.
  say "not root: cannot install ${PKGS[*]}; the local node will not run here" >&2
  exit 0
fi

missing=()
for p in "${PKGS[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
  [ "${status:0:2}" = "ii" ] || missing+=("$p")
done

if [ "${#missing[@]}" = 0 ]; then
  say "all node packages present (${PKGS[*]})"
  exit 0
fi

say "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
