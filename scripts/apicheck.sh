#!/usr/bin/env bash
# API compatibility check: compares the exported API of the public packages
# with the baseline committed under api/ (export data written by apidiff),
# and fails on any incompatible change, so a breaking change is a conscious
# decision.
#
#   bash scripts/apicheck.sh          # check (prints every change, fails on incompatible ones)
#   bash scripts/apicheck.sh -update  # accept the current API as the new baseline
#
# After a deliberate break (or any addition you want the baseline to know):
# run with -update, commit api/*.export with the change, and note the break
# in CHANGELOG.md. apidiff comes from the Go module proxy at a pinned version
# (golang.org/x/exp has no tags; bump APIDIFF together with a re-run of
# -update, since export data formats may change between versions).
set -euo pipefail
cd "$(dirname "$0")/.."

APIDIFF=golang.org/x/exp/cmd/apidiff@v0.0.0-20261113113407-e3970619a1a4
MODULE=github.com/longhaul-kafka/longhaul
PACKAGES=(producer producer/producertest inflight protocol)

mkdir -p api
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
GOBIN="$bin" go install "$APIDIFF"
apidiff="$bin/apidiff"
# Export data records source positions: -trimpath keeps them free of this
# checkout's and the module cache's locations, so a baseline written on one
# machine is byte-identical to one written on another.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"

status=0
for pkg in "${PACKAGES[@]}"; do
  base="api/$(echo "$pkg" | tr / _).export"
  if [ "${1:-}" = "-update" ]; then
    "$apidiff" -w "$base" "$MODULE/$pkg"
    echo "apicheck: wrote $base"
    continue
  fi
  if [ ! -f "$base" ]; then
    echo "apicheck: no baseline $base; run: bash scripts/apicheck.sh -update" >&2
    status=1
    continue
  fi
  "$apidiff" -w "$bin/current" "$MODULE/$pkg"
  changes=$("$apidiff" "$base" "$bin/current")
  if [ -n "$changes" ]; then
    echo "== $pkg"; echo "$changes"
  fi
  if [ -n "$("$apidiff" -incompatible "$base" "$bin/current")" ]; then
    echo "apicheck: $pkg has incompatible changes (above). If intended: bash scripts/apicheck.sh -update, commit api/, note it in CHANGELOG.md." >&2
    status=1
  fi
done
exit $status
