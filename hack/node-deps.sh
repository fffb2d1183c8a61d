#!/usr/bin/env bash
# Installs the Debian packages the local node (containerd + kubelet) and its images need, through
# apt-install.sh (idempotent: when every package is present it only says so).
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
#
# Without root it is not an error: there is no local node anyway; the demo and the tests say so and
# run the operator as a local process instead.
set -euo pipefail

exec bash "$(dirname "$0")/apt-install.sh" node-deps "node packages" "the local node will not run here" \
  containerd runc umoci busybox-static debootstrap buildah gcc libc6-dev netavark
