#!/usr/bin/env bash
# examples/sc21/table1.sbatch (issue 19, acceptance 1, Table 1 part): each of the paper's ten
# rows matches ../shared/spec/PERF.md's Table 1 (heads, hidden, layers, t, p, d, GPUs, micro
# batch, batch, and an interleaved schedule exactly where the paper has one), and its megatron-c
# command line passes megatron-c's parse and validation at the row's world size
# (test/tools/recipe_check: what a run checks before anything starts, without running it).
source "$(dirname "$0")/lib.sh"

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SCRIPT=$ROOT/examples/sc21/table1.sbatch
CHECK=${MC_BUILD:?}/test/tools/recipe_check
SHARED=${MEGATRON_C_SHARED:-$ROOT/../shared}
PERF=$SHARED/spec/PERF.md

arg() { # name file: the value after --name in the one-per-line arguments
    awk -v f="--$1" 'prev == f { print; exit } { prev = $0 }' "$2"
}
rows=$(bash "$SCRIPT" --rows)
check "ten rows" test "$(wc -l <<<"$rows")" -eq 10
for r in $rows; do
    bash "$SCRIPT" --print "$r" >"$MC_TMP/args" 2>"$MC_TMP/err"
    world=$(head -1 "$MC_TMP/args")
    tail -n +2 "$MC_TMP/args" >"$MC_TMP/argv"
    mapfile -t argv <"$MC_TMP/argv"
    if [ -x "$CHECK" ]; then
        out=$("$CHECK" "$world" "${argv[@]}" 2>&1)
        check "$r: validates at its world size $world ($(head -c 300 <<<"$out"))" test "$out" = starts
    else
        skip "$r: validates at its world size" "no $CHECK"
    fi
    if [ ! -f "$PERF" ]; then
        skip "$r: as the paper's Table 1" "$PERF is absent (set MEGATRON_C_SHARED)"
        continue
    fi
    t=$(arg tensor-model-parallel-size "$MC_TMP/argv") p=$(arg pipeline-model-parallel-size "$MC_TMP/argv")
    mine="$(arg num-attention-heads "$MC_TMP/argv") $(arg hidden-size "$MC_TMP/argv") $(arg num-layers "$MC_TMP/argv") $t $p $((world / t / p)) $world $(arg micro-batch-size "$MC_TMP/argv") $(arg global-batch-size "$MC_TMP/argv")"
    # the row of PERF.md's table with these heads, hidden size and layers: columns 2..10
    paper=$(awk -F'|' -v h="$(arg hidden-size "$MC_TMP/argv")" -v l="$(arg num-layers "$MC_TMP/argv")" \
        '$4 + 0 == h && $5 + 0 == l { s = ""; for (i = 3; i <= 11; i++) { gsub(/ /, "", $i); s = s (i > 3 ? " " : "") $i } print s }' "$PERF")
    check "$r: heads hidden layers t p d GPUs micro batch = the paper's ($mine | paper: ${paper:-no row})" \
        test "$mine" = "$paper"
done
# the interleaved schedule on exactly the paper's four rows, with its layers per virtual stage
inter=$(for r in $rows; do
    bash "$SCRIPT" --print "$r" | tail -n +2 >"$MC_TMP/a"
    v=$(arg num-layers-per-virtual-pipeline-stage "$MC_TMP/a")
    [ -n "$v" ] && echo "$r:$v"
done | tr '\n' ' ')
check "interleaved on 76B, 145B, 310B, 530B with 5, 5, 3, 1 layers per virtual stage ($inter)" \
    test "$inter" = "76B:5 145B:5 310B:3 530B:1 "
bash "$SCRIPT" --print 2T >/dev/null 2>"$MC_TMP/bad"
check "an unknown row: exit 2 naming the rows" bash -c "[ $? -eq 2 ] && grep -q \"no row '2T'\" '$MC_TMP/bad'"
