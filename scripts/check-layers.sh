#!/usr/bin/env bash
# Fails on any #include in the product code that points up a layer or sideways to another folder
# of the same layer (LAYERS, at the root): only includes from the file's own folder and from
# lower layers are allowed, so no two folders include each other.
# Usage: scripts/check-layers.sh [ROOT]   (default: the repository holding this script)
# Prints one line per offending include, "file:line: includes X (layer N) from layer M" (or "from
# another folder of layer M"), and exits 1 if there is any; exits 0 with a one-line summary
# otherwise.
set -uo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 2
[ -f LAYERS ] || { echo "check-layers: $root/LAYERS is missing" >&2; exit 2; }
layer_of() { awk -v d="$1" '!/^#/ && NF { for (i = 2; i <= NF; i++) if ($i == d) print $1 }' LAYERS; }
declare -A L
for d in $(awk '!/^#/ && NF { for (i = 2; i <= NF; i++) print $i }' LAYERS); do L[$d]=$(layer_of "$d"); done
bad=0 checked=0
while IFS= read -r f; do
    top=${f%%/*}
    [ "$top" = "$f" ] && top=$f                      # a file at the root names itself (main.c)
    from=${L[$top]:-}
    [ -n "$from" ] || continue                        # not product code (test/, scripts/, bench/)
    while IFS=: read -r line inc; do
        inc=${inc#*\"}; inc=${inc%%\"*}
        checked=$((checked + 1))
        case $inc in */*) ;; *) continue ;; esac      # same folder
        [ "${inc%%/*}" = "$top" ] && continue             # same folder, by its path
        to=${L[${inc%%/*}]:-}
        if [ -z "$to" ]; then
            echo "$f:$line: includes $inc, which is in no layer of LAYERS"; bad=$((bad + 1))
        elif [ "$to" -gt "$from" ]; then
            echo "$f:$line: includes $inc (layer $to) from layer $from"; bad=$((bad + 1))
        elif [ "$to" -eq "$from" ]; then
            echo "$f:$line: includes $inc from another folder of layer $from"; bad=$((bad + 1))
        fi
    done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | cut -d: -f1,2-)
done < <(find . -path ./build -prune -o -path ./test -prune -o -type f \
              \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cc' \) -print | sed 's#^\./##' | sort)
if [ "$bad" -gt 0 ]; then
    echo "check-layers: $bad include(s) point up a layer or across one (allowed directions: LAYERS)"
    exit 1
fi
echo "check-layers: $checked includes, none points up a layer or across one"
