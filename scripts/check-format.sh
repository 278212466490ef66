#!/usr/bin/env bash
# Fails when a product source file differs from what clang-format makes of it with the
# repository's .clang-format (the house style). Tests, scripts and the emulator are not checked.
# Usage: scripts/check-format.sh [ROOT] [--fix]
# Needs clang-format 14 (Debian 12's, what .ci installs): other versions format some constructs
# differently, so with another version (or none) it says so and exits 3 (a skip, not a pass).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd) fix=0
for a in "$@"; do case $a in --fix) fix=1 ;; *) root=$a ;; esac; done
cd "$root" || exit 2
[ -f LAYERS ] && [ -f .clang-format ] || { echo "check-format: $root lacks LAYERS or .clang-format" >&2; exit 2; }
command -v clang-format >/dev/null || { echo "check-format: clang-format is not installed"; exit 3; }
v=$(clang-format --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p')
[ "$v" = 14 ] || { echo "check-format: clang-format $v here, the style is checked with 14"; exit 3; }
dirs=$(awk '!/^#/ && NF { for (i = 2; i <= NF; i++) print $i }' LAYERS)
bad=0 n=0
while IFS= read -r f; do
    n=$((n + 1))
    if [ $fix = 1 ]; then clang-format -i "$f"; continue; fi
    if ! clang-format "$f" | cmp -s - "$f"; then
        echo "$f: not in the house style (scripts/check-format.sh --fix, or see the diff: clang-format $f | diff $f -)"
        bad=$((bad + 1))
    fi
done < <(for d in $dirs; do
             if [ -f "$d" ]; then echo "$d"
             elif [ -d "$d" ]; then find "$d" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cc' \); fi
         done | sort)
[ $bad -eq 0 ] || { echo "check-format: $bad of $n files differ from .clang-format"; exit 1; }
echo "check-format: $n files follow .clang-format"
