#!/usr/bin/env bash
# Data pipeline benchmark (docs/PERF.md, "Data pipeline"):
#  1. tokens/s of `megatron-c preprocess-data` (GPT-2 BPE, --append-eod) with 1 worker and with
#     all cores, against a Python peer of Megatron's tools/preprocess_data.py
#     (bench/bench_data_py.py: json.loads per line + the legacy GPT-2 BPE of
#     test/ref/gpt2_tokenizer_ref.py + the same .bin/.idx writer), on tinyshakespeare.jsonl and
#     on that file concatenated BENCH_COPIES times; start-up time (a one-line input) and peak RSS
#     (/usr/bin/time) for each; the outputs of every side are compared with cmp.
#     The same for the SentencePiece tokenizers on the fixture models of test/fixtures/tokenizers
#     (GPTSentencePieceTokenizer, BPE with byte fallback; SentencePieceTokenizer, unigram), one
#     worker on one core, against test/ref/sp_tokenizer_ref.py (sentencepiece's encode_as_ids per
#     line, the same writer) when build/venv-tok has sentencepiece, and per core against GPT-2.
#     Then HuggingFaceTokenizer and TikTokenizer on the same input with the fixtures of
#     test/fixtures/tokenizers/, one core, per-core tokens/s against GPT-2's.
#  2. the time to build a GPT dataset's indices (document, sample and shuffle index, as training
#     start-up does through mc_gpt_datasets_build) for a synthetic ~1B-token dataset
#     (bench/bench_index_build.c, compiled here against the repository's objects; its .bin is
#     a sparse file, since index building reads only the .idx's sequence lengths); and, where
#     this build has `megatron-c inspect-data`, the same split end to end as a whole process,
#     with an empty index cache (--data-cache-path) and with the cache that run wrote.
# Prints a table and the exact commands. Each measurement is repeated BENCH_REPEAT times and the
# best (fastest) is reported: the machine may be shared with other jobs. A benchmark, not a
# test: it never fails on speed, only when a side cannot run or the outputs differ.
#
#   bench/bench-data.sh
#   BENCH_COPIES=5 BENCH_REPEAT=1 BENCH_PY_POOL=0 BENCH_RSS_COPIES=0 BENCH_INDEX_DOCS=200000 \
#       bench/bench-data.sh                                                  # quick
#
# Environment (defaults in brackets): MEGATRON_C_SHARED [../shared] (data/text/tinyshakespeare.jsonl,
# data/gpt2/gpt2-{vocab.json,merges.txt}), BENCH_COPIES [20], BENCH_REPEAT [3],
# BENCH_WORKERS [nproc] (the "all cores" worker count), BENCH_CPU [0] (the core the one-core runs
# are pinned to, when taskset works), BENCH_PY_POOL [1] (also run the Python peer as Megatron
# does, a multiprocessing Pool of BENCH_WORKERS processes, on the large input),
# BENCH_RSS_COPIES [100] (one more megatron-c run on that many copies, for its peak RSS; 0: skip),
# BENCH_INDEX_DOCS [2000000] and BENCH_INDEX_MAXLEN [999] (synthetic dataset: documents of
# lengths uniform in [1, MAXLEN], about DOCS * (MAXLEN + 1) / 2 tokens), BENCH_SEQ [2048],
# BENCH_EPOCHS ["1 4"], MC_BIN [./megatron-c after `make megatron-c`], PYTHON [/usr/bin/python3],
# BENCH_TMP [${TMPDIR:-/tmp}] (where a new bench-data.XXXXXX dir is made; it is removed at exit
# unless BENCH_KEEP=1). Needs GNU time (Debian 'time') for RSS; taskset (util-linux) to pin.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

SHARED=${MEGATRON_C_SHARED:-$ROOT/../shared}
COPIES=${BENCH_COPIES:-20}
REPEAT=${BENCH_REPEAT:-3}
NPROC=$(nproc 2>/dev/null || echo 1)
WALL=${BENCH_WORKERS:-$NPROC}
CPU=${BENCH_CPU:-0}
PY_POOL=${BENCH_PY_POOL:-1}
BIG=${BENCH_RSS_COPIES:-100}
IDX_DOCS=${BENCH_INDEX_DOCS:-2000000}
IDX_MAXLEN=${BENCH_INDEX_MAXLEN:-999}
SEQ=${BENCH_SEQ:-2048}
EPOCHS=${BENCH_EPOCHS:-1 4}
PYTHON=${PYTHON:-/usr/bin/python3}
CC=${CC:-cc}

die() { echo "bench-data: $*" >&2; exit 1; }
say() { echo "bench-data: $*" >&2; }

TMP=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/bench-data.XXXXXX")
TMP=$(cd "$TMP" && pwd)
cleanup() { [ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$TMP"; }
trap cleanup EXIT

JSONL=$SHARED/data/text/tinyshakespeare.jsonl
VOCAB=$SHARED/data/gpt2/gpt2-vocab.json
MERGES=$SHARED/data/gpt2/gpt2-merges.txt
REF_BIN=$SHARED/data/megatron-ref/tinyshakespeare_text_document
for f in "$JSONL" "$VOCAB" "$MERGES"; do [ -r "$f" ] || die "missing $f (set MEGATRON_C_SHARED)"; done
"$PYTHON" -c 'import regex, numpy' 2>/dev/null \
    || die "$PYTHON cannot import regex and numpy (Debian: python3-regex python3-numpy)"

TIMEV=/usr/bin/time
NOTES=()
if ! [ -x "$TIMEV" ] || ! "$TIMEV" -f %M -o /dev/null true 2>/dev/null; then
    TIMEV=
    NOTES+=("GNU time (/usr/bin/time, Debian package 'time') missing: no peak RSS")
fi
PIN=()
if command -v taskset >/dev/null 2>&1 && taskset -c "$CPU" true 2>/dev/null; then
    PIN=(taskset -c "$CPU")
else
    NOTES+=("taskset missing or core $CPU unavailable: the one-core runs are not pinned")
fi

# ---- build ---------------------------------------------------------------------------------
if [ -n "${MC_BIN:-}" ]; then
    MCB=$MC_BIN
else
    say "make megatron-c"
    make -s megatron-c >"$TMP/build.log" 2>&1 || { tail -20 "$TMP/build.log" >&2; die "build failed"; }
    MCB=./megatron-c
fi
[ -x "$MCB" ] || die "$MCB is not executable"
# The index helper links the library objects the Makefile builds (the same source list, so a
# stale object of a removed file is never picked up) through an archive, which pulls only what
# the helper needs.
BUILD=build/rel
OBJS=()
for f in base/*.c config/*.c comm/*.c kernels/*.c kernels/cpu/*.c model/*.c data/*.c data/*.cc torchfmt/*.c parallel/*.c optim/*.c ckpt/*.c train/*.c cli/*.c; do
    [ -e "$f" ] || continue
    o=$BUILD/${f%.*}.o
    [ -f "$o" ] || { make -s "$o" >>"$TMP/build.log" 2>&1 || die "cannot build $o"; }
    OBJS+=("$o")
done
rm -f "$TMP/libmc.a"
ar rcs "$TMP/libmc.a" "${OBJS[@]}"
HELPER_CC=("$CC" -std=gnu11 -O2 -I. -o "$TMP/bench_index_build" bench/bench_index_build.c
           "$TMP/libmc.a" -lopenblas -ljansson -lpcre2-8 -lsentencepiece -lstdc++ -lz -lm -lpthread)
"${HELPER_CC[@]}" >>"$TMP/build.log" 2>&1 || { tail -20 "$TMP/build.log" >&2; die "cannot build bench/bench_index_build.c"; }

# ---- inputs --------------------------------------------------------------------------------
head -n 1 "$JSONL" >"$TMP/one.jsonl"
cp "$JSONL" "$TMP/x1.jsonl"
[ -z "$(tail -c 1 "$TMP/x1.jsonl")" ] || echo >>"$TMP/x1.jsonl"
: >"$TMP/xN.jsonl"
for _ in $(seq 1 "$COPIES"); do cat "$TMP/x1.jsonl" >>"$TMP/xN.jsonl"; done
LINES_N=$(wc -l <"$TMP/xN.jsonl")
BYTES_N=$(wc -c <"$TMP/xN.jsonl")

MC_ARGS=(--tokenizer-type GPT2BPETokenizer --vocab-file "$VOCAB" --merge-file "$MERGES" --append-eod --log-interval 100000000)
PY_ARGS=(--vocab-file "$VOCAB" --merge-file "$MERGES" --append-eod)

# run NAME INPUT N -- command...: the command with --input/--output-prefix appended, N times;
# the best (lowest) wall seconds in W[NAME] and that run's CPU seconds (user + system) in
# C[NAME], the highest peak RSS (KiB) of the runs in R[NAME], the token count in T[NAME] (from
# the .bin size: uint16), the output prefix in P[NAME].
declare -A W C R T P
now() { date +%s.%N; }
run() {
    local name=$1 input=$2 reps=$3; shift 4
    local prefix="$TMP/out.$name" best="" cpu="n/a" rss="" i
    for i in $(seq 1 "$reps"); do
        rm -f "${prefix}"_text_document.*
        local t0 t1 w r="" u="n/a"
        t0=$(now)
        if [ -n "$TIMEV" ]; then
            "$TIMEV" -f '%M %U %S' -o "$TMP/rss" "$@" --input "$input" --output-prefix "$prefix" >"$TMP/log.$name" 2>&1 \
                || { tail -20 "$TMP/log.$name" >&2; die "$name failed: $*"; }
            read -r r u1 s1 < <(tail -1 "$TMP/rss")
            u=$(awk -v a="$u1" -v b="$s1" 'BEGIN { printf "%.2f", a + b }')
        else
            "$@" --input "$input" --output-prefix "$prefix" >"$TMP/log.$name" 2>&1 \
                || { tail -20 "$TMP/log.$name" >&2; die "$name failed: $*"; }
        fi
        t1=$(now)
        w=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }')
        say "  $name run $i/$reps: ${w} s${r:+, CPU $u s, peak RSS $r KiB}"
        if [ -z "$best" ] || awk -v a="$w" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$w; cpu=$u; fi
        if [ -n "$r" ] && { [ -z "$rss" ] || [ "$r" -gt "$rss" ]; }; then rss=$r; fi
    done
    W[$name]=$best
    C[$name]=$cpu
    R[$name]=${rss:-n/a}
    T[$name]=$(( $(stat -c %s "${prefix}_text_document.bin") / 2 ))
    P[$name]=${prefix}_text_document
}
same() {  # same A B: the two outputs are byte-identical
    cmp -s "${P[$1]}.bin" "${P[$2]}.bin" && cmp -s "${P[$1]}.idx" "${P[$2]}.idx" \
        || die "outputs differ: ${P[$1]} vs ${P[$2]}"
}

MC1=("${PIN[@]}" "$MCB" preprocess-data "${MC_ARGS[@]}" --workers 1)
MC1U=("$MCB" preprocess-data "${MC_ARGS[@]}" --workers 1)
MCA=("$MCB" preprocess-data "${MC_ARGS[@]}" --workers "$WALL")
PY1=("${PIN[@]}" "$PYTHON" bench/bench_data_py.py "${PY_ARGS[@]}" --workers 1)
PYA=("$PYTHON" bench/bench_data_py.py "${PY_ARGS[@]}" --workers "$WALL" --pool)

say "start-up (one-line input), best of $REPEAT"
run mc_start "$TMP/one.jsonl" "$REPEAT" -- "${MC1[@]}"
run py_start "$TMP/one.jsonl" "$REPEAT" -- "${PY1[@]}"
same mc_start py_start
say "tinyshakespeare.jsonl (1x), best of $REPEAT"
run mc1_x1 "$TMP/x1.jsonl" "$REPEAT" -- "${MC1[@]}"
run mc1u_x1 "$TMP/x1.jsonl" "$REPEAT" -- "${MC1U[@]}"
run mca_x1 "$TMP/x1.jsonl" "$REPEAT" -- "${MCA[@]}"
run py1_x1 "$TMP/x1.jsonl" "$REPEAT" -- "${PY1[@]}"
same mc1_x1 py1_x1; same mc1_x1 mc1u_x1; same mc1_x1 mca_x1
REF_OK="no reference files"
if [ -r "$REF_BIN.bin" ] && [ -r "$REF_BIN.idx" ]; then
    cmp -s "${P[mc1_x1]}.bin" "$REF_BIN.bin" && cmp -s "${P[mc1_x1]}.idx" "$REF_BIN.idx" \
        || die "1x output differs from Megatron's $REF_BIN.{bin,idx}"
    REF_OK="identical to Megatron's $REF_BIN.{bin,idx}"
fi
say "tinyshakespeare.jsonl x$COPIES ($LINES_N lines, $BYTES_N bytes), best of $REPEAT"
run mc1_xN "$TMP/xN.jsonl" "$REPEAT" -- "${MC1[@]}"
run mc1u_xN "$TMP/xN.jsonl" "$REPEAT" -- "${MC1U[@]}"
run mca_xN "$TMP/xN.jsonl" "$REPEAT" -- "${MCA[@]}"
run py1_xN "$TMP/xN.jsonl" "$REPEAT" -- "${PY1[@]}"
same mc1_xN py1_xN; same mc1_xN mc1u_xN; same mc1_xN mca_xN
if [ "$PY_POOL" = 1 ]; then
    run pya_xN "$TMP/xN.jsonl" "$REPEAT" -- "${PYA[@]}"
    same mc1_xN pya_xN
fi
if [ "$BIG" -gt 0 ]; then
    say "memory check: tinyshakespeare.jsonl x$BIG, megatron-c --workers $WALL, once"
    : >"$TMP/xB.jsonl"
    for _ in $(seq 1 "$BIG"); do cat "$TMP/x1.jsonl" >>"$TMP/xB.jsonl"; done
    BYTES_B=$(wc -c <"$TMP/xB.jsonl")
    run mca_xB "$TMP/xB.jsonl" 1 -- "${MCA[@]}"
    rm -f "$TMP/xB.jsonl" "${P[mca_xB]}".*
fi

# ---- SentencePiece -------------------------------------------------------------------------
TOKPY=${BENCH_TOK_PYTHON:-$ROOT/build/venv-tok/bin/python}
SP_PY=0
"$TOKPY" -c 'import sentencepiece, numpy' 2>/dev/null && SP_PY=1 \
    || NOTES+=("no $TOKPY with sentencepiece (scripts/install-deps.sh): no Python peer for SentencePiece")
SP_KINDS=("bpe GPTSentencePieceTokenizer sp_bpe_bytefallback.model" "uni SentencePieceTokenizer sp_unigram.model")
SPCMDS=()
for k in "${SP_KINDS[@]}"; do
    read -r tag type model <<<"$k"
    spm=(--tokenizer-type "$type" --tokenizer-model "$ROOT/test/fixtures/tokenizers/$model" --append-eod)
    SPMC=("${PIN[@]}" "$MCB" preprocess-data "${spm[@]}" --log-interval 100000000 --workers 1)
    SPCMDS+=("${SPMC[*]}")
    say "SentencePiece $type ($model), tinyshakespeare.jsonl x$COPIES, best of $REPEAT"
    run "sp_mc_$tag" "$TMP/xN.jsonl" "$REPEAT" -- "${SPMC[@]}"
    if [ $SP_PY = 1 ]; then
        SPPY=("${PIN[@]}" "$TOKPY" test/ref/sp_tokenizer_ref.py expect --model "$ROOT/test/fixtures/tokenizers/$model"
              --type "$type" --append-eod)
        SPCMDS+=("${SPPY[*]}")
        run "sp_py_$tag" "$TMP/xN.jsonl" "$REPEAT" -- "${SPPY[@]}"
        same "sp_mc_$tag" "sp_py_$tag"
    fi
done

# ---- the other byte-level BPE tokenizers, one core, against GPT-2's run above ----------------
# The fixtures of test/fixtures/tokenizers/ (small vocabularies trained on tinyshakespeare, in
# Llama 3's, Qwen2's and Mistral NeMo's styles; a tiktoken vocabulary with both patterns).
FX=test/fixtures/tokenizers
OTHER=("HuggingFaceTokenizer, Llama 3 style|--tokenizer-type HuggingFaceTokenizer --tokenizer-model $FX/llama3"
       "HuggingFaceTokenizer, Qwen2 style (NFC)|--tokenizer-type HuggingFaceTokenizer --tokenizer-model $FX/qwen2"
       "HuggingFaceTokenizer, Mistral NeMo style|--tokenizer-type HuggingFaceTokenizer --tokenizer-model $FX/nemo"
       "TikTokenizer v1|--tokenizer-type TikTokenizer --tiktoken-pattern v1 --vocab-size 3003 --tokenizer-model $FX/tiktoken.json"
       "TikTokenizer v2|--tokenizer-type TikTokenizer --tiktoken-pattern v2 --vocab-size 3003 --tokenizer-model $FX/tiktoken.json")
OTHER_CMDS=()
say "other tokenizers: tinyshakespeare.jsonl x$COPIES, one core, best of $REPEAT"
for i in "${!OTHER[@]}"; do
    read -ra flags <<<"${OTHER[$i]#*|}"
    cmd=("${PIN[@]}" "$MCB" preprocess-data "${flags[@]}" --append-eod --log-interval 100000000 --workers 1)
    OTHER_CMDS+=("${cmd[*]}")
    run "tok$i" "$TMP/xN.jsonl" "$REPEAT" -- "${cmd[@]}"
done

# ---- index build ---------------------------------------------------------------------------
say "index build: synthetic dataset of $IDX_DOCS documents, lengths 1..$IDX_MAXLEN"
GEN=("$TMP/bench_index_build" gen "$TMP/syn" "$IDX_DOCS" "$IDX_MAXLEN" 1)
"${GEN[@]}" >"$TMP/gen.log" || die "bench_index_build gen failed"
IDX_TOKENS=$(grep -o 'tokens=[0-9]*' "$TMP/gen.log" | cut -d= -f2)
declare -A IB IO IS IE IX IM
XCMDS=()
for e in $EPOCHS; do
    for i in $(seq 1 "$REPEAT"); do
        line=$("$TMP/bench_index_build" build "$TMP/syn" "$SEQ" "$e") || die "bench_index_build build failed"
        kv() { grep -o "$1=[0-9.]*" <<<"$line" | cut -d= -f2; }
        b=$(kv build_s)
        say "  $e epoch(s) run $i/$REPEAT: build ${b} s (open $(kv open_s) s), $(kv samples) samples, peak RSS $(kv peak_rss_kb) KiB"
        if [ -z "${IB[$e]:-}" ] || awk -v a="$b" -v c="${IB[$e]}" 'BEGIN { exit !(a < c) }'; then
            IB[$e]=$b; IO[$e]=$(kv open_s); IS[$e]=$(kv samples); IE[$e]=$(kv epochs)
            IX[$e]=$(kv index_bytes); IM[$e]=$(kv peak_rss_kb)
        fi
    done
done

# End to end, as training start-up does it: `megatron-c inspect-data` (where this build has it)
# opens the dataset, builds the train split's indices and prints one sample's hash. Cold: an
# empty --data-cache-path (build, then write the cache); warm: the cache that run wrote (read).
declare -A XC XW
XNOTE=""
if "$MCB" inspect-data --help >/dev/null 2>&1; then
    for e in $EPOCHS; do
        ns=$(( e * ((IDX_TOKENS - 1) / SEQ) ))
        XCMD=("$MCB" inspect-data --train-data-path "$TMP/syn" --data-cache-path "$TMP/cache"
              --seq-length "$SEQ" --max-position-embeddings "$SEQ" --train-samples "$ns"
              --global-batch-size 8 --micro-batch-size 1 --eval-iters 0
              --tokenizer-type NullTokenizer --vocab-size 50257 --samples 0:1 --format sha256)
        XCMDS+=("${XCMD[*]}")
        for mode in cold warm; do
            for i in $(seq 1 "$REPEAT"); do
                if [ "$mode" = cold ]; then rm -rf "$TMP/cache"; fi
                t0=$(now)
                if ! "${XCMD[@]}" >"$TMP/inspect.log" 2>&1; then
                    XNOTE="megatron-c inspect-data failed ($(tail -1 "$TMP/inspect.log")): no end-to-end timing"
                    break 3
                fi
                t1=$(now)
                w=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }')
                say "  inspect-data, $e epoch(s), $mode cache, run $i/$REPEAT: $w s"
                if [ "$mode" = cold ]; then cur=${XC[$e]:-}; else cur=${XW[$e]:-}; fi
                if [ -z "$cur" ] || awk -v a="$w" -v b="$cur" 'BEGIN { exit !(a < b) }'; then
                    if [ "$mode" = cold ]; then XC[$e]=$w; else XW[$e]=$w; fi
                fi
            done
        done
        rm -rf "$TMP/cache"
    done
else
    XNOTE="this build has no 'megatron-c inspect-data': no end-to-end timing"
fi

# ---- table ---------------------------------------------------------------------------------
mib() { [ "$1" = n/a ] && echo n/a || awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }
tps() { awk -v t="$1" -v w="$2" 'BEGIN { printf "%.0f", t / w }'; }
FMT="%-48s %-6s %10s %8s %8s %11s %10s\n"
row() {  # label input-label name
    printf "$FMT" "$1" "$2" "${T[$3]}" "${W[$3]}" "${C[$3]}" "$(tps "${T[$3]}" "${W[$3]}")" "$(mib "${R[$3]}")"
}
echo
echo "preprocess-data, GPT-2 BPE, --append-eod. Inputs: tinyshakespeare.jsonl (1x) and ${COPIES} copies of it"
echo "(${COPIES}x: $LINES_N lines, $BYTES_N bytes). Wall seconds include start-up; best of $REPEAT runs"
echo "(CPU s: user + system of that run; peak RSS: the highest of the runs)."
echo
printf "$FMT" "" input tokens "wall s" "CPU s" "tokens/s" "peak RSS"
row "megatron-c --workers 1, one core" 1x mc1_x1
row "megatron-c --workers 1, unpinned" 1x mc1u_x1
row "megatron-c --workers $WALL" 1x mca_x1
row "Python peer, 1 process, one core" 1x py1_x1
row "megatron-c --workers 1, one core" "${COPIES}x" mc1_xN
row "megatron-c --workers 1, unpinned" "${COPIES}x" mc1u_xN
row "megatron-c --workers $WALL" "${COPIES}x" mca_xN
row "Python peer, 1 process, one core" "${COPIES}x" py1_xN
if [ "$PY_POOL" = 1 ]; then row "Python peer, Pool($WALL) (Megatron's shape)" "${COPIES}x" pya_xN; fi
if [ "$BIG" -gt 0 ]; then row "megatron-c --workers $WALL (one run, $((BYTES_B / 1000000)) MB)" "${BIG}x" mca_xB; fi
echo
printf "start-up (one-line input): megatron-c %s s (CPU %s s, peak RSS %s), Python peer %s s (CPU %s s, peak RSS %s)\n" \
    "${W[mc_start]}" "${C[mc_start]}" "$(mib "${R[mc_start]}")" "${W[py_start]}" "${C[py_start]}" "$(mib "${R[py_start]}")"
awk -v m1="${W[mc1_xN]}" -v ma="${W[mca_xN]}" -v p1="${W[py1_xN]}" -v ms="${W[mc_start]}" \
    -v ps="${W[py_start]}" -v m11="${W[mc1_x1]}" -v p11="${W[py1_x1]}" -v n="$WALL" \
    -v pa="${W[pya_xN]:-}" -v c="$COPIES" -v t="${T[mc1_xN]}" 'BEGIN {
    printf "ratio per core (tokens/s of megatron-c --workers 1 / Python peer, both on one core): %.1fx on %dx, %.1fx on 1x\n", p1 / m1, c, p11 / m11
    if (m1 > ms && p1 > ps)
        printf "  less each side'"'"'s start-up (%dx): megatron-c %.0f tokens/s, Python %.0f tokens/s, %.1fx\n", c, t / (m1 - ms), t / (p1 - ps), (p1 - ps) / (m1 - ms)
    printf "all cores (%dx): megatron-c --workers %d %.0f tokens/s = %.1fx the Python peer on one core (%.1fx per core)\n", c, n, t / ma, p1 / ma, p1 / ma / n
    if (pa != "") printf "  against the Python peer run as Megatron runs it, Pool(%d): %.1fx\n", n, pa / ma
}'
echo "outputs: .bin/.idx byte-identical across every megatron-c and Python run of an input; 1x $REF_OK"
echo
echo "preprocess-data, SentencePiece (test/fixtures/tokenizers), --append-eod, ${COPIES}x, one worker on one core"
printf "$FMT" "" input tokens "wall s" "CPU s" "tokens/s" "peak RSS"
for k in "${SP_KINDS[@]}"; do
    read -r tag type model <<<"$k"
    row "megatron-c $type" "${COPIES}x" "sp_mc_$tag"
    if [ $SP_PY = 1 ]; then row "  Python peer (sentencepiece package)" "${COPIES}x" "sp_py_$tag"; fi
    awk -v t="${T[sp_mc_$tag]}" -v w="${W[sp_mc_$tag]}" -v gt="${T[mc1_xN]}" -v gw="${W[mc1_xN]}" \
        -v p="${W[sp_py_$tag]:-}" -v n="$type" 'BEGIN {
        printf "  %s: %.0f tokens/s per core = %.2fx GPT-2 BPE'"'"'s %.0f", n, t / w, (t / w) / (gt / gw), gt / gw
        if (p != "") printf "; %.1fx the Python peer", p / w
        printf "\n" }'
done
echo
echo "other tokenizers, megatron-c --workers 1 on one core, ${COPIES}x (per core, against GPT-2's run above;"
echo "CPU s is what the ratio uses, wall s includes start-up; small fixture vocabularies, so more tokens per byte):"
OFMT="%-42s %10s %8s %8s %11s %8s %12s\n"
printf "$OFMT" "" tokens "wall s" "CPU s" "tokens/s" "MB/s" "x GPT-2 tok/s"
orow() { # label name
    awk -v l="$1" -v t="${T[$2]}" -v w="${W[$2]}" -v c="${C[$2]}" -v b="$BYTES_N" -v gt="${T[mc1_xN]}" \
        -v gc="${C[mc1_xN]}" -v f="$OFMT" 'BEGIN {
        cpu = (c == "n/a") ? w : c; gcpu = (gc == "n/a") ? w : gc
        printf f, l, t, w, c, sprintf("%.0f", t / cpu), sprintf("%.1f", b / cpu / 1e6), sprintf("%.2f", (t / cpu) / (gt / gcpu)) }'
}
orow "GPT2BPETokenizer (the run above)" mc1_xN
for i in "${!OTHER[@]}"; do orow "${OTHER[$i]%%|*}" "tok$i"; done
echo
echo "index build, train split over all of a synthetic dataset: $IDX_DOCS documents, $IDX_TOKENS tokens, seq $SEQ, best of $REPEAT"
echo "(build s: mc_gpt_datasets_build in bench_index_build, the .idx open included; inspect-data: the"
echo "whole megatron-c process, cold = empty index cache, warm = reading the cache the cold run wrote)"
printf "%-8s %8s %9s %9s %10s %10s %14s %14s\n" "epochs" "samples" "build s" "(open s)" "index MiB" "peak RSS" "inspect cold s" "inspect warm s"
for e in $EPOCHS; do
    printf "%-8s %8s %9s %9s %10s %10s %14s %14s\n" "${IE[$e]}" "${IS[$e]}" "${IB[$e]}" "${IO[$e]}" \
        "$(awk -v b="${IX[$e]}" 'BEGIN { printf "%.1f", b / 1048576 }')" "$(mib "${IM[$e]}")" \
        "${XC[$e]:-n/a}" "${XW[$e]:-n/a}"
done
echo
echo "commands (each also run with --input FILE --output-prefix PREFIX):"
echo "  ${MC1[*]}"
echo "  ${MC1U[*]}"
echo "  ${MCA[*]}"
echo "  ${PY1[*]}"
if [ "$PY_POOL" = 1 ]; then echo "  ${PYA[*]}"; fi
for c in "${SPCMDS[@]}"; do echo "  $c"; done
for c in "${OTHER_CMDS[@]}"; do echo "  $c"; done
echo "  ${HELPER_CC[*]}   # libmc.a: ar of the Makefile's library objects"
echo "  ${GEN[*]}"
for e in $EPOCHS; do echo "  $TMP/bench_index_build build $TMP/syn $SEQ $e"; done
for c in "${XCMDS[@]+"${XCMDS[@]}"}"; do echo "  $c"; done
echo "machine: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $NPROC cores; commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
[ -z "$XNOTE" ] || NOTES+=("$XNOTE")
for n in "${NOTES[@]+"${NOTES[@]}"}"; do echo "note: $n"; done
if [ "${BENCH_KEEP:-0}" = 1 ]; then echo "files kept in $TMP"; fi
exit 0
