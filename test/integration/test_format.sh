#!/usr/bin/env bash
# The product code follows .clang-format (scripts/check-format.sh), and the check can fail: a
# copy of one file with blanks after its statements is reported, and --fix repairs it.
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CHECK=$ROOT/scripts/check-format.sh

out=$("$CHECK" "$ROOT" 2>&1); rc=$?
if [ $rc -eq 3 ]; then
    skip "product code follows .clang-format" "$out"
    exit 0
fi
if [ $rc -eq 0 ]; then ok "product code follows .clang-format ($out)"; else not_ok "format: $out"; fi

T=$MC_TMP/tree
mkdir -p "$T/base"
cp "$ROOT/LAYERS" "$ROOT/.clang-format" "$T/"
cp "$ROOT/base/error.c" "$T/base/"
"$CHECK" "$T" >/dev/null 2>&1; rc=$?
check "an unchanged file passes" [ $rc -eq 0 ]
sed -i 's/;$/;   /' "$T/base/error.c"
out=$("$CHECK" "$T" 2>&1); rc=$?
check "a file with blanks after its statements fails, named" \
    bash -c '[ '$rc' -eq 1 ] && grep -q "^base/error.c: not in the house style" <<<"$1"' _ "$out"
"$CHECK" "$T" --fix >/dev/null 2>&1
check "--fix restores the house style" cmp -s "$ROOT/base/error.c" "$T/base/error.c"
