#!/usr/bin/env bash
# Mutation fuzzing of the inputs megatron-c reads from users: Megatron's .idx/.bin datasets
# (fuzz_idx), torch.save files (fuzz_pt), the training flags (fuzz_flags) and DCP .metadata files
# (fuzz_dcp); test/fuzz/.
#
#   scripts/fuzz.sh [idx|pt|flags|dcp|all] [--seconds N] [--seed S] [--crashes DIR]
#
# Runs each chosen fuzzer for N seconds (default 60) with a deterministic seed (default 1), each
# input in a child process; a sanitizer report, a crash or a hang is a failure, and the input is
# saved under DIR (default fuzz-crashes/) with the child's output beside it. Builds the fuzzers
# with SANITIZE=1 (build/san) unless MC_BUILD names a build folder that has them. Seeds: the
# shared tinyshakespeare dataset, a torch-written common.pt and the torch_dist reference
# .metadata files (MEGATRON_C_SHARED, default ../shared) when present, and small inputs the
# fuzzers make themselves. Exit 0: no failure.
set -u
cd "$(dirname "$0")/.."
which=all seconds=60 seed=1 crashes=fuzz-crashes
while [ $# -gt 0 ]; do
    case $1 in
    idx|pt|flags|dcp|all) which=$1 ;;
    --seconds) seconds=$2; shift ;;
    --seed) seed=$2; shift ;;
    --crashes) crashes=$2; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scripts/fuzz.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
SHARED=${MEGATRON_C_SHARED:-../shared}
if [ -z "${MC_BUILD:-}" ]; then
    make -s -j2 SANITIZE=1 build/san/test/fuzz/fuzz_idx build/san/test/fuzz/fuzz_pt \
        build/san/test/fuzz/fuzz_flags build/san/test/fuzz/fuzz_dcp || exit 2
    MC_BUILD=$PWD/build/san
fi
DATA=$SHARED/data/megatron-ref/tinyshakespeare_text_document
PT=$SHARED/data/megatron-ref/torch_dist/tp1pp1/iter_0000010/common.pt
seeds_idx=() seeds_pt=() seeds_dcp=()
[ -f "$DATA.idx" ] && seeds_idx+=("$DATA")
[ -f "$PT" ] && seeds_pt+=("$PT")
for l in tp1pp1 tp2pp1 tp1pp2; do
    M=$SHARED/data/megatron-ref/torch_dist/$l/iter_0000010/.metadata
    [ -f "$M" ] && seeds_dcp+=("$M")
done

rc=0
for f in idx pt flags dcp; do
    [ "$which" = all ] || [ "$which" = "$f" ] || continue
    case $f in
    idx) seeds=("${seeds_idx[@]+"${seeds_idx[@]}"}") ;;
    pt) seeds=("${seeds_pt[@]+"${seeds_pt[@]}"}") ;;
    flags) seeds=() ;;
    dcp) seeds=("${seeds_dcp[@]+"${seeds_dcp[@]}"}") ;;
    esac
    "$MC_BUILD/test/fuzz/fuzz_$f" --seconds "$seconds" --seed "$seed" --crashes "$crashes" \
        -- "${seeds[@]+"${seeds[@]}"}" || rc=1
done
exit $rc
