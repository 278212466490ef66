#!/usr/bin/env bash
# Shows that the emulated device can fail: plants defects of the kinds the CUDA review lists
# (../shared/reviews/cuda-2026-11-25.md) into a copy of the tree, one at a time, rebuilds the
# emulated test that should see it, and reports which test caught it and how. A planted defect
# that no test catches is a failure of this script: a gap to close.
#
# Only the kernels the test exercises are rebuilt: a mutant in kernels/cuda/X.cu recompiles
# X.cu's object, one in a shared header (gemm_map.h, common.cuh) the objects of the tested ops
# (kernels/cuda/<test>.cu), the other kernels keep theirs; after each mutant the objects it
# rebuilt are put back from the tree's build instead of being compiled again. A mutant's objects
# are compiled at -O0 without debug information (MUTANT_OPT to change it; attention.cu's compile
# takes a fifth of -O2's time), and a test stops at its first failed check (CMOCKA_TEST_ABORT=1):
# one failure is the answer.
#
#   test/emu/mutants.sh             # every mutant, on build/emu's objects (made if missing)
#   MUTANTS="3 5" test/emu/mutants.sh
#   SANITIZE=1 test/emu/mutants.sh  # the same against build/emu-san (AddressSanitizer + UBSan)
#
# Prints TAP lines ("ok N - <defect>: caught by <test> (<how>)") and a closing count.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
SAN=${SANITIZE:-0}
EMU_DIR=build/emu
[ "$SAN" = 1 ] && EMU_DIR=build/emu-san
# make test's emulated build (MC_EMU_BUILD, an absolute path under this tree) when given
if [ -n "${MC_EMU_BUILD:-}" ]; then
    EMU_DIR=build/$(basename "$MC_EMU_BUILD")
    case "$EMU_DIR" in build/emu-san) SAN=1 ;; build/emu) SAN=0 ;; *) echo "MC_EMU_BUILD=$MC_EMU_BUILD: not build/emu(-san)"; exit 1 ;; esac
fi

# number | file | text as written | planted text | test programs (test_gpu_*) | schedules | defect
MUTANTS_TABLE=(
"1|kernels/cuda/gemm_map.h|    c.lda = r.ldb;|    c.lda = r.lda;|gemm|forward|wrong leading dimension in the row-major -> cuBLASLt mapping"
"2|kernels/cuda/gemm_map.h|    c.opa = r.transb;|    c.opa = r.transa;|gemm|forward|wrong operation (transposition) in the cuBLASLt mapping"
"3|kernels/cuda/attention.cu|        __syncthreads(); // the previous tile's K, V and P are read no more|        // planted: barrier removed|attention|forward warps|removed barrier: the attention forward's loop-top __syncthreads"
"4|kernels/cuda/common.cuh|    __syncthreads(); // sh may still be read by a previous call's broadcast|    // planted: barrier removed|layernorm|forward warps|removed barrier: mc_block_reduce's leading __syncthreads (a race between calls)"
"5|kernels/cuda/reduce.cu|            if (c * VEC + k < n) acc = op(acc, Red::term(v[k]));|            if (c * VEC + k < n - 1) acc = op(acc, Red::term(v[k]));|reduce|forward|off-by-one index: the reductions drop the last element"
"6|kernels/cuda/embedding.cu|    if (c >= H) return;|    if (c > H) return;|embedding|forward|off-by-one index: the embedding backward writes one column past the row"
"7|kernels/cuda/common.cuh|    return __float2bfloat16_rn(x);|    return __float2bfloat16_rz(x);|elementwise|forward|missing bf16 rounding: stores truncate instead of rounding to nearest even"
"8|kernels/cuda/attention.cu|m.seg_q[r] == m.seg_k[c + 1]),|m.seg_q[r] == m.seg_k[c + 2]),|attention|forward|out-of-bounds shared-memory read: the forward's document of key c + 1 read one key further"
"9|kernels/cuda/attention.cu|                    fa, A_COL ? A + 16 * kk * lda + 16 * mi : A + 16 * mi * lda + 16 * kk, lda);|                    fa, A_COL ? A + 16 * kk * lda + 16 * mi : A + 16 * mi * lda + 16 * kk, lda + 1);|attention|forward|wmma load with a wrong leading dimension (ldm)"
"10|kernels/cuda/reduce.cu|enum { RED_THREADS = 256, RED_BLOCKS = 1024, RED_FINAL_THREADS = 1024 };|enum { RED_THREADS = 256, RED_BLOCKS = 1024, RED_FINAL_THREADS = 2048 };|reduce|forward|a launch over the H100's 1024 threads per block"
"11|kernels/cuda/cudnn_sdpa.cu|    v.kt = {{B, NG, D, S}, {W, gs, 1, B * W}, QPG * D};|    v.kt = {{B, NG, D, S}, {W, gs, 1, W}, QPG * D};|attention_cudnn|forward|cuDNN: a wrong stride (K's sequence stride without the batch rows)"
"12|kernels/cuda/cudnn_sdpa.cu|    float scale = c.scale, ninf = -INFINITY, dscale|    float scale = c.scale * 1.25f, ninf = -INFINITY, dscale|attention_cudnn|forward|cuDNN: a wrong softmax scale in the forward"
"13|kernels/cuda/cudnn_sdpa.cu|    const float *stats = c.stats; // the forward's log-sum-exp of each row (a block's: merged)|    const float *stats = (const float *)((char *)c.scratch + sc.sum);|attention_cudnn|forward|cuDNN: the statistics not passed to the backward (its scratch instead)"
"14|kernels/cuda/cudnn_sdpa.cu|    void *q = (void *)c.q, *kt = (void *)elem(kv, v.kt.off, k.dt);|    void *kt = (void *)c.q, *q = (void *)elem(kv, v.kt.off, k.dt);|attention_cudnn|forward|cuDNN: Q and K swapped"
"15|kernels/cuda/cudnn_sdpa.cu|        v.rows = {{B, NH, S, 1}, {NH, 1, B * NH, 1}, 0};|        v.rows = {{B, NH, S, 1}, {NH * S, S, 1, 1}, 0};|attention_cp|forward|cuDNN cp blocks: the statistics in cuDNN's [b, h, s] layout, not the block ops' [s, b, h]"
"16|kernels/cuda/cudnn_sdpa.cu|    v.dq = k.block ? v.o : v.q;|    v.dq = v.q;|attention_cp|forward|cuDNN cp blocks: dQ written through qkv's strides, not its dense accumulator's"
"17|kernels/cuda/attention_cp_cudnn.cu|block_key(dt, Sq, Sk, B, NH, NG, HD, causal), &why);|block_key(dt, Sq, Sk, B, NH, NG, HD, false), &why);|attention_cp|forward|cuDNN cp blocks: the ring's diagonal block without its causal mask"
)

WORK=$(mktemp -d /tmp/mc-mutants.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
# the tree's emulated build, up to date: the copy below starts from it and returns to it
if ! make -q EMU=1 SANITIZE="$SAN" emu-tests >/dev/null 2>&1; then
    echo "# building $EMU_DIR first"
    make -s -j"$(nproc)" EMU=1 SANITIZE="$SAN" emu-tests >"$WORK/build.log" 2>&1 || { tail -20 "$WORK/build.log"; exit 1; }
fi
# the working tree's files (committed or not) and the built objects, times kept, so that only
# what a mutant touches is rebuilt
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$WORK"
mkdir -p "$WORK/build" && cp -a "$EMU_DIR" "$WORK/build/"

n=0 caught=0 missed=0
run_tests() { # tests schedules: prints how the first failure showed, returns 0 if one did
    local t s rc first
    for t in $1; do
        first=
        for s in $2; do
            (cd "$WORK" && MC_EMU_SCHED=$s MC_EMU_HASH="$WORK/hash.$s" CMOCKA_MESSAGE_OUTPUT=TAP OPENBLAS_NUM_THREADS=1 \
                CMOCKA_TEST_ABORT=1 timeout 900 "$EMU_DIR/test/test_gpu_$t") >"$WORK/out" 2>&1
            rc=$?
            if [ $rc -ne 0 ] || grep -q '^not ok' "$WORK/out"; then
                echo "test_gpu_$t under $s: $(grep -m1 -E 'cuda-emu: error|ERROR|error:|runtime error|AddressSanitizer|Failure' "$WORK/out" | cut -c1-220) (exit $rc)"
                return 0
            fi
            [ -z "$first" ] && first=$s && continue
            if ! cmp -s "$WORK/hash.$first" "$WORK/hash.$s"; then
                echo "test_gpu_$t: device memory differs between $first and $s ($(diff "$WORK/hash.$first" "$WORK/hash.$s" | sed -n 2p))"
                return 0
            fi
        done
    done
    return 1
}

for m in "${MUTANTS_TABLE[@]}"; do
    IFS='|' read -r num file from to tests scheds what <<<"$m"
    [ -n "${MUTANTS:-}" ] && [[ " $MUTANTS " != *" $num "* ]] && continue
    n=$((n + 1))
    FROM=$from TO=$to python3 -c 'import os,sys
p=sys.argv[1]; s=open(p).read(); f=os.environ["FROM"]
if s.count(f) < 1: sys.exit(1)
open(p,"w").write(s.replace(f, os.environ["TO"], 1))' "$WORK/$file"
    if [ $? -ne 0 ]; then
        echo "not ok $n - mutant $num ($what): its text is no longer in $file; update the table"
        missed=$((missed + 1))
        continue
    fi
    targets="" keep=()
    for t in $tests; do targets="$targets $EMU_DIR/test/test_gpu_$t"; done
    # the kernels' objects left as they are (make -o): all but the mutated file's, or for a
    # header the tested ops'
    rebuild=" $EMU_DIR/kernels/cuda/$(basename "$file" .cu).cu.o "
    case $file in *.cu) ;; *) rebuild=" $(for t in $tests; do printf '%s ' "$EMU_DIR/kernels/cuda/$t.cu.o"; done)" ;; esac
    for o in "$WORK/$EMU_DIR"/kernels/cuda/*.cu.o; do
        o=${o#"$WORK/"}
        [[ "$rebuild" == *" $o "* ]] || keep+=(-o "$o")
    done
    touch "$WORK/stamp"
    if ! (cd "$WORK" && make -s -j"$(nproc)" EMU=1 SANITIZE="$SAN" EMU_OPT="${MUTANT_OPT:--O0}" DEBUG_FLAGS=-g0 "${keep[@]}" $targets) >"$WORK/build.log" 2>&1; then
        echo "ok $n - mutant $num ($what): caught by the build ($(grep -m1 'error' "$WORK/build.log" | cut -c1-200))"
        caught=$((caught + 1))
    elif how=$(run_tests "$tests" "$scheds"); then
        echo "ok $n - mutant $num ($what): caught by $how"
        caught=$((caught + 1))
    else
        echo "not ok $n - mutant $num ($what): NOT caught by test_gpu_{${tests// /,}} under $scheds"
        missed=$((missed + 1))
    fi
    # back to the tree: the file with its time, and what the mutant rebuilt from the tree's build
    cp -p "$file" "$WORK/$file"
    find "$WORK/$EMU_DIR" -type f -newer "$WORK/stamp" -printf '%P\n' | while IFS= read -r f; do
        if [ -e "$EMU_DIR/$f" ]; then cp -p "$EMU_DIR/$f" "$WORK/$EMU_DIR/$f"; else rm -f "$WORK/$EMU_DIR/$f"; fi
    done
done
echo "1..$n"
echo "mutants: $caught caught, $missed missed"
[ "$missed" -eq 0 ]
