#!/usr/bin/env bash
# scripts/timed.sh NAME CMD... — run CMD, print how long it took, exit with its status.
set -uo pipefail
name=$1
shift
start=$(date +%s%N)
echo "==> $name" >&2
"$@"
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
printf '<== %s: %d.%ds (exit %d)\n' "$name" $((ms / 1000)) $((ms % 1000 / 100)) "$rc" >&2
exit "$rc"
