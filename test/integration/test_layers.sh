#!/usr/bin/env bash
# The include directions of LAYERS hold (scripts/check-layers.sh), and the check can fail: on a
# copy of the tree with one include planted that points up a layer, one across to another folder
# of the same layer, and one into no layer.
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CHECK=$ROOT/scripts/check-layers.sh

out=$("$CHECK" "$ROOT" 2>&1); rc=$?
if [ $rc -eq 0 ]; then ok "no include points up a layer ($out)"; else not_ok "layers: $out"; fi

T=$MC_TMP/tree
mkdir -p "$T/base" "$T/model" "$T/data" "$T/cli" "$T/test"
cp "$ROOT/LAYERS" "$T/"
printf '#include "base/error.h"\n#include "model/gpt.h"\n' >"$T/cli/ok.c"
printf '#include "model/params.h"\n' >"$T/model/own.c"
printf '#include "cli/args.h"\n' >"$T/test/anything.c"
out=$("$CHECK" "$T" 2>&1); rc=$?
check "a tree whose includes point down passes" [ $rc -eq 0 ]
printf '#include "base/error.h"\n #include "cli/flags.h"\n' >"$T/model/gpt.c"
out=$("$CHECK" "$T" 2>&1); rc=$?
check "an include that points up fails, naming file, line and layers" \
    bash -c '[ '$rc' -eq 1 ] && grep -q "^model/gpt.c:2: includes cli/flags.h (layer 11) from layer 5$" <<<"$1"' _ "$out"
rm "$T/model/gpt.c"
printf '#include "base/error.h"\n#include "model/gpt.h"\n' >"$T/data/source.c"
out=$("$CHECK" "$T" 2>&1); rc=$?
check "an include across to another folder of the same layer fails" \
    bash -c '[ '$rc' -eq 1 ] && grep -q "^data/source.c:2: includes model/gpt.h from another folder of layer 5$" <<<"$1"' _ "$out"
rm "$T/data/source.c"
printf '#include "nowhere/x.h"\n' >"$T/base/error.c"
out=$("$CHECK" "$T" 2>&1); rc=$?
check "an include into no layer fails" \
    bash -c '[ '$rc' -eq 1 ] && grep -q "base/error.c:1: includes nowhere/x.h, which is in no layer" <<<"$1"' _ "$out"
rm "$T/LAYERS"
"$CHECK" "$T" >/dev/null 2>&1; rc=$?
check "a missing LAYERS file is an error" [ $rc -eq 2 ]
