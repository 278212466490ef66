#!/usr/bin/env bash
# examples/sc21: every point of every script (Table 1's rows, the sweeps
# of figures 11 to 18) passes megatron-c's dry run (plan --check) at its world size, and is the
# paper's: Table 1's rows are ../shared/spec/PERF.md's table; each figure's points are exactly
# the layouts, models, batches, schedules and recomputation that the paper's figure (and
# Megatron-LM's examples/sc21/run_figure_*.sh) sweeps, written out below independently of the
# scripts, and each point's name says what it runs. Then the modes a user meets: unknown points and
# arguments, a job of the wrong size, and a job that runs a copy of its script (as sbatch does).
source "$(dirname "$0")/lib.sh"

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SC21=$ROOT/examples/sc21
SHARED=${MEGATRON_C_SHARED:-$ROOT/../shared}
PERF=$SHARED/spec/PERF.md

arg() { # name file: the value after --name in the one-per-line arguments
    awk -v f="--$1" 'prev == f { print; exit } { prev = $0 }' "$2"
}

# sig FILE: a point's facts from its --print output (world size on the first line):
# "t p d world micro batch layers hidden heads vstage recompute sp params(B)"; params by GPT's
# count (12h^2 + 13h a layer, the embeddings at the paper's padded vocabulary 51200).
sig() {
    awk 'NR == 1 { w = $0; next }
         { if (prev ~ /^--/) v[prev] = $0; if ($0 == "--sequence-parallel") sp = "sp"; prev = $0 }
         END {
             t = v["--tensor-model-parallel-size"]; p = v["--pipeline-model-parallel-size"]
             L = v["--num-layers"]; h = v["--hidden-size"]; s = v["--seq-length"]
             d = (w % (t * p) == 0) ? w / (t * p) : "not-whole"
             rc = "none" # (tested before v[...] is read: reading an awk array adds the key)
             if ("--recompute-granularity" in v)
                 rc = (v["--recompute-granularity"] == "full" && v["--recompute-method"] == "uniform" &&
                       v["--recompute-num-layers"] == 1) ? "full" : "other"
             vs = ("--num-layers-per-virtual-pipeline-stage" in v) ? v["--num-layers-per-virtual-pipeline-stage"] : "-"
             printf "%s %s %s %s %s %s %s %s %s %s %s %s %.1f\n", t, p, d, w, v["--micro-batch-size"],
                 v["--global-batch-size"], L, h, v["--num-attention-heads"], vs, rc, (sp ? sp : "-"),
                 (L * (12 * h * h + 13 * h) + (51200 + s) * h + 2 * h) / 1e9
         }' "$1"
}

# validate WORLD ARGS...: the dry run's verdict on the line at WORLD GPUs, 8 a node (megatron-c
# plan --check: exit 0 when a run would start, 2 with Megatron's validation errors): "ok" or
# the errors.
validate() {
    local out
    out=$("$MC_BIN" plan --check --num-gpus "$1" --gpus-per-node 8 "${@:2}" 2>&1) && { echo ok; return; }
    head -c 300 <<<"$out"
}

# Every point of SCRIPT: printed (MC_TMP/NAME/POINT), validated, and its facts in MC_TMP/NAME.sigs
# as "point facts".
survey() {
    local script=$1 name=$2 pt bad=() n=0
    mkdir -p "$MC_TMP/$name"
    : >"$MC_TMP/$name.sigs"
    for pt in $(bash "$script" --points); do
        n=$((n + 1))
        bash "$script" --print "$pt" >"$MC_TMP/$name/$pt" 2>&1 || { bad+=("$pt: --print failed"); continue; }
        local world argv verdict
        world=$(head -1 "$MC_TMP/$name/$pt")
        mapfile -t argv < <(tail -n +2 "$MC_TMP/$name/$pt")
        verdict=$(validate "$world" "${argv[@]}")
        [ "$verdict" = ok ] || bad+=("$pt at $world GPUs: $verdict")
        echo "$pt $(sig "$MC_TMP/$name/$pt")" >>"$MC_TMP/$name.sigs"
    done
    check "$name: all $n points validate at their world sizes${bad:+ (${bad[*]})}" test "${#bad[@]}" -eq 0
}

# same_points NAME EXPECTED: the points' facts (without names and parameter counts) are exactly
# EXPECTED's lines, in any order.
same_points() {
    local got want
    got=$(cut -d' ' -f2-13 "$MC_TMP/$1.sigs" | sort)
    want=$(sort <<<"$2")
    check "$1: the paper's sweep, $(wc -l <<<"$want") points$([ "$got" = "$want" ] ||
        echo " (differs: $(diff <(echo "$want") <(echo "$got") | grep '^[<>]' | head -6 | tr '\n' ';'))")" \
        test "$got" = "$want"
}

# params NAME BILLIONS: every point's model has the size the paper states, within 0.5%.
params() {
    local off
    off=$(awk -v want="$2" '{ r = $14 / want - 1; if (r > 0.005 || r < -0.005) printf "%s:%sB ", $1, $14 }' \
        "$MC_TMP/$1.sigs")
    check "$1: the paper's ${2}B-parameter model${off:+ (not: $off)}" test -z "$off"
}

# names NAME: each point's name says what it runs (p<p>, t<t>, d<d>, b<batch>, mb<micro>, and the
# schedule, recomputation or scatter/gather variant it names).
names() {
    local wrong
    wrong=$(awk '{ n = split($1, part, "-"); ok = 1
        for (i = 1; i <= n; i++) {
            x = part[i]
            if (x ~ /^p[0-9]+$/) ok = ok && substr(x, 2) == $3
            else if (x ~ /^t[0-9]+$/) ok = ok && substr(x, 2) == $2
            else if (x ~ /^d[0-9]+$/) ok = ok && substr(x, 2) == $4
            else if (x ~ /^b[0-9]+$/) ok = ok && substr(x, 2) == $7
            else if (x ~ /^mb[0-9]+$/) ok = ok && substr(x, 3) == $6
        }
        if ($1 ~ /^interleaved-/) ok = ok && $11 != "-"
        if ($1 ~ /^1f1b-/) ok = ok && $11 == "-"
        if ($1 ~ /^recompute-/) ok = ok && $12 == "full"
        if ($1 ~ /^no-recompute-/) ok = ok && $12 == "none"
        if ($1 ~ /^scatter-gather-/) ok = ok && $13 == "sp"
        if ($1 ~ /^no-scatter-gather-/) ok = ok && $13 == "-"
        if (!ok) printf "%s ", $1 }' "$MC_TMP/$1.sigs")
    check "$1: each point's name says what it runs${wrong:+ (not: $wrong)}" test -z "$wrong"
}

# ---- Table 1 ----
survey "$SC21/table1.sbatch" table1
rows=$(bash "$SC21/table1.sbatch" --points)
check "table1: ten rows, also listed by --rows" test "$(wc -l <<<"$rows")" -eq 10 -a \
    "$(bash "$SC21/table1.sbatch" --rows)" = "$rows"
if [ -f "$PERF" ]; then
    while read -r r t p d w mbs gbs L h heads _ rc _; do
        # the row of PERF.md's table with these heads, hidden size and layers: columns 2..10
        paper=$(awk -F'|' -v h="$h" -v l="$L" \
            '$4 + 0 == h && $5 + 0 == l { s = ""; for (i = 3; i <= 11; i++) { gsub(/ /, "", $i); s = s (i > 3 ? " " : "") $i } print s }' "$PERF")
        mine="$heads $h $L $t $p $d $w $mbs $gbs"
        check "table1 $r: heads hidden layers t p d GPUs micro batch = the paper's ($mine | paper: ${paper:-no row})" \
            test "$mine" = "$paper" -a "$rc" = full
    done <"$MC_TMP/table1.sigs"
else
    skip "table1: as the paper's Table 1" "$PERF is absent (set MEGATRON_C_SHARED)"
fi
inter=$(awk '$11 != "-" { printf "%s:%s ", $1, $11 }' "$MC_TMP/table1.sigs")
check "table1: interleaved on 76B, 145B, 310B, 530B with 5, 5, 3, 1 layers per virtual stage ($inter)" \
    test "$inter" = "76B:5 145B:5 310B:3 530B:1 "

# ---- Figures 11 to 18: the facts "t p d world micro batch layers hidden heads vstage recompute
# sp" of every point, from the paper and Megatron-LM's run_figure_*.sh ----
for f in 11 12 13 14 15 16 17 18; do survey "$SC21/figure$f.sbatch" "figure$f"; done

# 11: weak scaling of pipeline parallelism: 3 layers a stage, t = 8, one node a stage
want=$(for p in 1 2 4 8; do for b in 8 128; do
    echo "8 $p 1 $((8 * p)) 1 $b $((3 * p)) 20480 128 - full -"; done; done)
same_points figure11 "$want"
# 12: interleaved (2 layers a virtual stage) against 1F1B, 175B on 96 GPUs
want=$(for v in 2 -; do for b in 12 24 36 48 60; do
    echo "8 12 1 96 1 $b 96 12288 96 $v full -"; done; done)
same_points figure12 "$want"
params figure12 175
# 13: (p, t) with p * t = 64, 162.2B
want=$(for p in 2 4 8 16 32; do for b in 32 128; do
    echo "$((64 / p)) $p 1 64 1 $b 32 20480 128 - full -"; done; done)
same_points figure13 "$want"
params figure13 162.2
# 14: (p, d) with p * d = 64, 5.9B
want=$(for p in 2 4 8 16 32; do for b in 32 512; do
    echo "1 $p $((64 / p)) 64 1 $b 32 3840 32 - full -"; done; done)
same_points figure14 "$want"
params figure14 5.9
# 15: (t, d) with t * d = 64, 5.9B
want=$(for t in 2 4 8 16 32; do for b in 32 128 512; do
    echo "$t 1 $((64 / t)) 64 1 $b 32 3840 32 - full -"; done; done)
same_points figure15 "$want"
params figure15 5.9
# 16: the micro batch size, 91B at (t, p) = (8, 8)
want=$(for m in 1 2 4 8; do for b in 128 512; do
    echo "8 8 1 64 $m $b 32 15360 128 - full -"; done; done)
same_points figure16 "$want"
params figure16 91
# 17: recomputation or none, 145B at (t, p) = (8, 16), batch 1 to 256
want=$(for r in full none; do for b in 1 2 4 8 16 32 64 128 256; do
    echo "8 16 1 128 1 $b 80 12288 96 - $r -"; done; done)
same_points figure17 "$want"
params figure17 145
# 18: scatter/gather (today: sequence parallelism, see figure18.sbatch) or not, as figure 12's
# interleaved runs
want=$(for s in sp -; do for b in 12 24 36 48 60; do
    echo "8 12 1 96 1 $b 96 12288 96 2 full $s"; done; done)
same_points figure18 "$want"
for f in 11 12 13 14 15 16 17 18; do names "figure$f"; done
# 18's substitute does what the paper's optimization did to the pipeline's traffic: with
# sequence parallelism each rank sends 1/t of what it sends without, as much as megatron-c plan
# predicts for the paper's own scatter/gather (--pp-scatter-gather)
p2p() { # point plan-options...: the pipeline's volume per GPU an iteration, as megatron-c plan
    # says (its number: bytes, or GB as it once printed; the checks below take ratios)
    MEGATRON_C=$MC_BIN bash "$SC21/figure18.sbatch" --plan "$@" 2>&1 |
        sed -En 's/^ *pipeline p2p .* ([0-9.]+) (bytes|GB) per GPU.*/\1/p'
}
sg=$(p2p scatter-gather-b24) none=$(p2p no-scatter-gather-b24) paper=$(p2p no-scatter-gather-b24 --pp-scatter-gather)
check "figure18: scatter-gather points send 1/8 of the pipeline's bytes, as the paper's optimization ($sg, $none, $paper)" \
    awk -v a="$sg" -v b="$none" -v c="$paper" 'BEGIN { exit !(a > 0 && a == c && (b / a - 8) ^ 2 < 1e-4) }'

# ---- the modes ----
MEGATRON_C=$MC_BIN bash "$SC21/figure18.sbatch" --check scatter-gather-b60 >"$MC_TMP/out" 2>&1
check "--check: megatron-c plan --check of the point at its world size ($(head -c 200 "$MC_TMP/out"))" \
    grep -q "valid at 96 ranks" "$MC_TMP/out"
MEGATRON_C=$MC_BIN bash "$SC21/figure16.sbatch" --plan mb2-b512 --gpu a100 >"$MC_TMP/out" 2>&1
check "--plan: megatron-c plan of the point with plan's options ($(head -1 "$MC_TMP/out" | head -c 200))" \
    grep -q "^> plan: 64 x A100 .*tp 8, pp 8, dp 1, micro batch 2, 256 microbatches" "$MC_TMP/out"
bash "$SC21/figure16.sbatch" --check mb2-b512 --gpu a100 >/dev/null 2>"$MC_TMP/bad"
check "--check with more: exit 2, one line" bash -c "[ $? -eq 2 ] && [ \$(wc -l <'$MC_TMP/bad') -eq 1 ]"
bash "$SC21/figure13.sbatch" --print p8-t4-b32 >/dev/null 2>"$MC_TMP/bad"
check "an unknown point: exit 2 naming the points" \
    bash -c "[ $? -eq 2 ] && grep -q \"no point 'p8-t4-b32' (points: p2-t32-b32 \" '$MC_TMP/bad'"
bash "$SC21/table1.sbatch" --print 2T >/dev/null 2>"$MC_TMP/bad"
check "an unknown row: exit 2 naming the rows" bash -c "[ $? -eq 2 ] && grep -q \"no row '2T'\" '$MC_TMP/bad'"
bash "$SC21/figure11.sbatch" --plot >/dev/null 2>"$MC_TMP/bad"
check "an unknown argument: exit 2, one line" bash -c "[ $? -eq 2 ] && [ \$(wc -l <'$MC_TMP/bad') -eq 1 ]"
env -u POINT bash "$SC21/figure11.sbatch" >/dev/null 2>"$MC_TMP/bad"
check "no POINT: exit 2 naming the points" bash -c "[ $? -eq 2 ] && grep -q 'set POINT to one of: p1-b8 ' '$MC_TMP/bad'"

# A job as sbatch runs it: a copy of the script in a spool folder (common.sh found through
# scontrol's Command=), srun with the point's arguments; fake scontrol and srun say what they got.
mkdir -p "$MC_TMP/bin" "$MC_TMP/spool"
cp "$SC21/figure12.sbatch" "$MC_TMP/spool/slurm_script"
printf '#!/bin/sh\necho "JobId=$3 JobName=x Command=%s/figure12.sbatch WorkDir=/tmp"\n' "$SC21" >"$MC_TMP/bin/scontrol"
printf '#!/bin/sh\nprintf "%%s\\n" "$@" >"%s/srun.args"\n' "$MC_TMP" >"$MC_TMP/bin/srun"
chmod +x "$MC_TMP/bin/scontrol" "$MC_TMP/bin/srun"
(cd "$MC_TMP/spool" && PATH=$MC_TMP/bin:$PATH SLURM_JOB_ID=7 SLURM_NTASKS=96 POINT=interleaved-b24 \
    MEGATRON_C=/opt/megatron-c bash ./slurm_script) >/dev/null 2>"$MC_TMP/job.err"
{ echo --mpi=pmix; echo /opt/megatron-c; tail -n +2 "$MC_TMP/figure12/interleaved-b24"; } >"$MC_TMP/want.args"
err=$(head -c 200 "$MC_TMP/job.err" | tr '\n' ' ')
check "a job runs srun --mpi=pmix megatron-c with the point's arguments, from sbatch's copy${err:+ ($err)}" \
    cmp -s "$MC_TMP/want.args" "$MC_TMP/srun.args"
rm -f "$MC_TMP/srun.args"
(cd "$MC_TMP/spool" && PATH=$MC_TMP/bin:$PATH SLURM_JOB_ID=7 SLURM_NTASKS=64 POINT=interleaved-b24 \
    bash ./slurm_script) >/dev/null 2>"$MC_TMP/job.err"
check "a job of the wrong size: exit 2 saying the nodes it needs, nothing run" \
    bash -c "[ $? -eq 2 ] && grep -q 'runs on 96 GPUs, 8 a node (sbatch --nodes=12)' '$MC_TMP/job.err' && [ ! -e '$MC_TMP/srun.args' ]"
