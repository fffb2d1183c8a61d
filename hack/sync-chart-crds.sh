#!/usr/bin/env bash
# Copies the generated CRDs (crds/*.yaml, from `secretferry crds`) into the Helm chart.
#
# Why a copy and not a symlink: Helm does not follow symlinks that leave the chart directory, and
# a packaged chart must carry its CRDs. The chart templates them from files/crds/ (behind
# crds.enabled / crds.keep); tests/integration/chart/test_chart_crds.py fails when the copy drifts.
set -euo pipefail
cd "$(dirname "$0")/.."
src=crds
dst=charts/secretferry/files/crds
shopt -s nullglob
files=("$src"/*.yaml)
if [ "${#files[@]}" -eq 0 ]; then
  echo "sync-chart-crds: no CRDs in $src/ (run 'make crds' first)" >&2
  exit 1
fi
mkdir -p "$dst"
# Remove copies whose source is gone, so a renamed CRD does not linger in the chart.
for f in "$dst"/*.yaml; do
  [ -e "$src/$(basename "$f")" ] || rm -f "$f"
done
cp "${files[@]}" "$dst"/
echo "sync-chart-crds: ${#files[@]} CRD(s) copied to $dst/"
