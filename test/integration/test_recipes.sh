#!/usr/bin/env bash
# Megatron-LM's own recipes (test/recipes/*.args: its examples and functional tests, each file
# saying where it came from), as megatron-c meets them:
#   as written  the arguments, placeholders filled, checked at the recipe's world size without
#               running (test/tools/recipe_check: the parse and validation training runs first,
#               as test/unit/cli/test_cli_recipes.c checks the SC21 scripts). The outcome, "starts" or
#               "refused" with the flags (--flag, or --flag=value where the value is refused) the
#               error lines name, must be the file's "# expect:" line.
#   shrunk      the same arguments less the refused flags (and less those the shrunk line is then
#               refused for: parts not implemented for it, rules needing a dropped flag), with
#               the model, data and schedule
#               made tiny (below), train 3 iterations on the CPU with finite losses on one rank
#               (tp = pp = 1), and, where the recipe has tp or pp > 1, under mpirun with its
#               tp and pp (halved, larger first, until tp x pp <= 4).
# `test_recipes.sh --update` rewrites every "# expect:" line to today's outcome (after flags
# were added or implemented); then review the diff. RECIPES="a b" runs only those recipes.
#
# Shrinking: every flag the list SHRUNK names is taken out and set as below; flags outside it
# stay as written. Model: 2 layers (2 per pipeline stage and virtual stages kept with a
# pipeline; a recipe that lays out its stages itself keeps its layer count there), hidden 64,
# 4 heads, ffn 128, 2 query groups (the tp size when larger), kv channels 16 (each only where
# the recipe sets it), seq 64. Schedule: micro batch 1, global batch 2 (the pipeline size when
# larger), --train-iters 3 (a recipe counting in samples: its lr schedule in iterations), decay
# over 3 iterations and warmup 1 where the recipe has them, --eval-iters 0, --log-interval 1.
# fp16 starts from a loss scale of 4096 (2^32 skips the first steps, which then log no loss).
# Data: --mock-data and the null tokenizer with 512 tokens (the GPT-2 files' 50257 made a run
# about 8 times slower); paths for saving, loading, caches and tensorboard in a temporary
# directory. Context parallelism stays in the parallel run (tp and pp halve first); expert
# parallelism is dropped with the parallel sizes, as are --rampup-batch-size and
# --step-batch-size-schedule (their batches exceed the tiny global batch).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

RECIPE_DIR=$(cd "$(dirname "$0")/../recipes" && pwd)
CHECK=${MC_RECIPE_CHECK:-${MC_BUILD:-$(dirname "$MC_BIN")}/test/tools/recipe_check}
UPDATE=0
[ "${1:-}" = --update ] && UPDATE=1

SHRUNK=" --num-layers --hidden-size --ffn-hidden-size --num-attention-heads --num-query-groups
 --kv-channels --seq-length --max-position-embeddings --micro-batch-size --global-batch-size
 --rampup-batch-size --step-batch-size-schedule --train-iters --train-samples --lr-decay-iters --lr-decay-samples
 --lr-warmup-iters --lr-warmup-samples --eval-iters --log-interval --data-path --mock-data
 --vocab-file --merge-file --tokenizer-type --tokenizer-model --vocab-size
 --tensor-model-parallel-size --pipeline-model-parallel-size --context-parallel-size
 --expert-model-parallel-size --num-layers-per-virtual-pipeline-stage
 --num-virtual-stages-per-pipeline-rank --decoder-first-pipeline-num-layers
 --decoder-last-pipeline-num-layers --account-for-embedding-in-pipeline-split
 --account-for-loss-in-pipeline-split --initial-loss-scale "
# the flags that lay out pipeline stages: kept with the recipe's layer count when it runs
# with pipeline parallelism
LAYOUT=" --num-layers-per-virtual-pipeline-stage --num-virtual-stages-per-pipeline-rank
 --decoder-first-pipeline-num-layers --decoder-last-pipeline-num-layers
 --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split "

# fill LINE DIR: FILLED, the recipe line with its placeholders filled for a run whose files
# go under DIR
fill() {
    local s=$1 d=$2
    s=${s//@DATA@/$d/data/my-gpt3_00_text_document}
    s=${s//@DATA1@/$d/data/dataset_1}
    s=${s//@DATA2@/$d/data/dataset_2}
    s=${s//@DATA3@/$d/data/dataset_3}
    s=${s//@VOCAB@/$d/data/gpt2-vocab.json}
    s=${s//@MERGES@/$d/data/gpt2-merges.txt}
    s=${s//@TOKENIZER@/$d/data/tokenizer.model}
    s=${s//@CKPT@/$d/ckpt}
    s=${s//@SAVE@/$d/ckpt}
    s=${s//@LOAD@/$d/ckpt}
    s=${s//@TB@/$d/tensorboard}
    s=${s//@CACHE@/$d/cache}
    FILLED=$s
}

# read_recipe FILE: WORLD, EXPECT, LINES (the argument lines, one flag with its values each)
# and VAL (each flag's first value, empty for a switch)
declare -A VAL
read_recipe() {
    local l v
    WORLD=$(sed -nE 's/^# world: ([0-9]+).*/\1/p' "$1")
    EXPECT=$(sed -nE 's/^# expect: (.*)$/\1/p' "$1")
    mapfile -t LINES < <(grep -vE '^[[:space:]]*(#|$)' "$1")
    VAL=()
    for l in "${LINES[@]}"; do
        v=""
        [[ $l == *" "* ]] && v=${l#* } && v=${v%% *}
        VAL[${l%% *}]=$v
    done
}
value_of() { printf '%s' "${VAL[$1]:-}"; }
has() { [ -n "${VAL[$1]+set}" ]; }

# args_of DIR: ARGS, the recipe's lines split into words (as a shell splits an unquoted
# expansion: quotes stay in the values), placeholders filled
args_of() {
    local l w
    ARGS=()
    for l in "${LINES[@]}"; do
        fill "$l" "$1"
        for w in $FILLED; do ARGS+=("$w"); done
    done
}

# refused ERR: the flags megatron-c's error lines name, one word each, sorted: the first --flag
# of each line, as --flag=value where the line goes on with the recipe's value for it; a line
# naming no flag is its words joined by "_"
refused() {
    local line flag rest val
    grep '^megatron-c: error: ' "$1" | while IFS= read -r line; do
        line=${line#megatron-c: error: }
        if [[ $line =~ (--[A-Za-z0-9][A-Za-z0-9_-]*)(.*) ]]; then
            flag=${BASH_REMATCH[1]} rest=${BASH_REMATCH[2]}
            val=${VAL[$flag]:-}
            if [ -n "$val" ] && [[ $rest == " $val"* ]]; then echo "$flag=$val"; else echo "$flag"; fi
        else
            echo "${line// /_}"
        fi
    done | sort -u | tr '\n' ' ' | sed 's/ $//'
}

# needing ERR DROPPED: the first flag of each error line of ERR that says a part is not
# implemented yet or names a flag of DROPPED (a rule that needs a dropped flag), one word each
needing() {
    local line f w names=" $(for f in $2; do printf '%s ' "${f%%=*}"; done)"
    grep '^megatron-c: error: ' "$1" | while IFS= read -r line; do
        line=${line#megatron-c: error: }
        [[ $line =~ (--[A-Za-z0-9][A-Za-z0-9_-]*)(.*) ]] || continue
        f=${BASH_REMATCH[1]}
        if [[ $line == *"not implemented yet"* ]]; then echo "$f"; continue; fi
        for w in ${BASH_REMATCH[2]//[^A-Za-z0-9_-]/ }; do
            if [[ $w == --* ]] && [[ $names == *" $w "* ]]; then echo "$f"; break; fi
        done
    done | sort -u | tr '\n' ' ' | sed 's/ $//'
}

# shrink MODE TP PP DIR REFUSED: SARGS, the shrunk line (MODE single or parallel)
shrink() {
    local mode=$1 tp=$2 pp=$3 d=$4 refused l f w layers gbs layout="" v base kept_lines
    refused=" $(for f in $5; do printf '%s ' "${f%%=*}"; done)"
    kept() { has "$1" && [[ $refused != *" $1 "* ]]; }
    # the pipeline layout this run keeps, and its layer count
    layers=2
    if [ "$mode" = parallel ] && [ "$pp" -gt 1 ]; then
        layers=$((2 * pp))
        for f in --decoder-first-pipeline-num-layers --decoder-last-pipeline-num-layers \
            --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split; do
            kept "$f" && layout=recipe
        done
        if [ "$layout" = recipe ]; then
            layers=$(value_of --num-layers)
            layout=$LAYOUT
        elif kept --num-virtual-stages-per-pipeline-rank; then
            layers=$((pp * $(value_of --num-virtual-stages-per-pipeline-rank)))
            layout=" --num-virtual-stages-per-pipeline-rank "
        elif kept --num-layers-per-virtual-pipeline-stage; then
            v=$(value_of --num-layers-per-virtual-pipeline-stage)
            layers=$((2 * pp * v))
            layout=" --num-layers-per-virtual-pipeline-stage "
        fi
    fi
    SARGS=(--device cpu)
    kept_lines=()
    for l in "${LINES[@]}"; do
        f=${l%% *}
        [[ $refused == *" $f "* ]] && continue
        [[ $SHRUNK == *" $f"[[:space:]]* ]] && [[ $layout != *" $f"[[:space:]]* ]] && continue
        fill "$l" "$d"
        for w in $FILLED; do SARGS+=("$w"); done
        fill "$l" DIR
        kept_lines+=("$FILLED")
    done
    base=${#SARGS[@]}
    gbs=2
    if [ "$mode" = parallel ]; then
        SARGS+=(--tensor-model-parallel-size "$tp" --pipeline-model-parallel-size "$pp")
        [ "${CPS:-1}" -gt 1 ] && SARGS+=(--context-parallel-size "$CPS")
        [ "$pp" -gt 2 ] && gbs=$pp
    fi
    SARGS+=(--num-layers "$layers" --hidden-size 64 --num-attention-heads 4 --seq-length 64
        --max-position-embeddings 64 --micro-batch-size 1 --global-batch-size "$gbs"
        --train-iters 3 --eval-iters 0 --log-interval 1 --mock-data
        --tokenizer-type NullTokenizer --vocab-size 512)
    has --ffn-hidden-size && SARGS+=(--ffn-hidden-size 128)
    has --num-query-groups && SARGS+=(--num-query-groups $((tp > 2 ? tp : 2)))
    has --kv-channels && SARGS+=(--kv-channels 16)
    if has --lr-decay-iters || has --lr-decay-samples; then SARGS+=(--lr-decay-iters 3); fi
    if has --lr-warmup-iters || has --lr-warmup-samples; then SARGS+=(--lr-warmup-iters 1); fi
    if kept --fp16; then SARGS+=(--initial-loss-scale 4096); fi
    # the line's identity: its recipe lines in order of name (no recipe repeats a flag), then
    # what was added
    SKEY="$(printf '%s\n' "${kept_lines[@]}" | sort | tr '\n' ' ')${SARGS[*]:base}"
    return 0
}

# losses_ok OUT: 3 logged iterations, each applied (none skipped: a skipped step logs a loss of
# 0) with a finite, positive lm loss
losses_ok() {
    grep -E '\| lm loss: ' "$1" | awk '
        { n++
          if (!match($0, /\| lm loss: [^ |]+ \|/)) { bad++; next }
          v = substr($0, RSTART + 11, RLENGTH - 13)
          if (v !~ /^[0-9.]+(E[+-][0-9]+)?$/ || v + 0 <= 0) bad++
          if ($0 ~ /number of skipped iterations: +[1-9]/) bad++ }
        END { exit !(n == 3 && bad == 0) }'
}

# start TAG NAME MODE NP: runs SARGS in the background (on NP ranks under mpirun when MODE is
# parallel), its output in $RUN_DIR/TAG.*; finish TAG waits for it and prints its TAP line. A
# recipe's runs overlap (the machine idles while ranks start). A line that another recipe was
# shrunk to already (paths aside) is not run again: its result stands, named.
declare -A RAN NAME KEY LINE
start() {
    local tag=$1 np=$4 d=$RUN_DIR/$1
    # placeholders of this run are filled with its own directory
    local args=("${SARGS[@]//$RUN_DIR/$d}")
    NAME[$tag]=$2 KEY[$tag]="$np $SKEY" LINE[$tag]="${args[*]}"
    [ -n "${RAN[${KEY[$tag]}]:-}" ] && return
    mkdir -p "$d"
    if [ "$3" = parallel ]; then
        (mpirun_mc "$np" "${args[@]}" >"$d/out" 2>"$d/err"; echo $? >"$d/rc") &
    else
        (timeout 120 "$MC_BIN" "${args[@]}" >"$d/out" 2>"$d/err"; echo $? >"$d/rc") &
    fi
}
finish() {
    local tag=$1 d=$RUN_DIR/$1 name=${NAME[$1]} key=${KEY[$1]} rc losses
    if [ ! -d "$d" ]; then
        case ${RAN[$key]} in
        ok:*) ok "$name: the line of ${RAN[$key]#ok:}" ;;
        *) not_ok "$name: the line of ${RAN[$key]#bad:}, which failed" ;;
        esac
        return
    fi
    wait
    rc=$(cat "$d/rc" 2>/dev/null || echo "?")
    if [ "$rc" = 0 ] && losses_ok "$d/out"; then
        losses=$(sed -nE 's/.*\| lm loss: ([^ |]+) \|.*/\1/p' "$d/out" | tr '\n' ' ')
        ok "$name: losses $losses"
        RAN[$key]="ok:${name%% *} (losses $losses)"
    else
        not_ok "$name (rc=$rc, losses: $(sed -nE 's/.*\| lm loss: ([^ |]+) \|.*/\1/p' "$d/out" | tr '\n' ' ')stderr: $(grep -v '^megatron-c: warning' "$d/err" | head -c 600); line: ${LINE[$tag]})"
        RAN[$key]="bad:${name%% *}"
    fi
}

if [ ! -x "$CHECK" ]; then
    not_ok "recipe_check is built ($CHECK; make $CHECK)"
    exit 1
fi

total=0 starts=0
for file in "$RECIPE_DIR"/*.args; do
    name=$(basename "$file" .args)
    [ -n "${RECIPES:-}" ] && [[ " $RECIPES " != *" $name "* ]] && continue
    total=$((total + 1))
    read_recipe "$file"
    RUN_DIR=$MC_TMP/$name
    mkdir -p "$RUN_DIR"

    # (a) as written, at its world size
    args_of "$RUN_DIR"
    timeout 60 "$CHECK" "$WORLD" "${ARGS[@]}" >"$RUN_DIR/check.out" 2>"$RUN_DIR/check.err"
    rc=$?
    ref=$(refused "$RUN_DIR/check.err")
    if [ $rc -eq 0 ] && grep -qx starts "$RUN_DIR/check.out"; then
        outcome=starts
        starts=$((starts + 1))
    elif [ $rc -eq 2 ] && [ -n "$ref" ]; then
        outcome="refused $ref; shrunk without them"
    else
        outcome="failed (rc=$rc: $(head -c 300 "$RUN_DIR/check.err"))"
    fi
    if [ $UPDATE = 1 ] && [ "$outcome" != "$EXPECT" ] && [[ $outcome != failed* ]]; then
        E=$outcome awk '/^# expect: / { print "# expect: " ENVIRON["E"]; next } { print }' "$file" >"$RUN_DIR/new"
        cat "$RUN_DIR/new" >"$file"
        echo "# $name: expectation updated: $outcome"
        EXPECT=$outcome
    fi
    if [ "$outcome" = "$EXPECT" ]; then
        ok "$name as written at world size $WORLD: $outcome"
    else
        not_ok "$name as written at world size $WORLD: $outcome, expected $EXPECT"
    fi

    # (b) shrunk, without the flags refused as written, then without those the shrunk line is
    # refused for (a part not implemented for this model yet, as MoE with --bf16 once expert
    # parallelism is gone) or whose rules need a flag dropped (--moe-grouped-gemm needs --bf16)
    [[ $outcome == refused* ]] || ref=""
    # (a flag whose rule needs pipeline parallelism, --defer-embedding-wgrad-compute, is left out
    # of the one-rank run only: solo)
    shrink single 1 1 "$RUN_DIR" "$ref"
    also="" solo=""
    for round in 1 2 3; do
        timeout 60 "$CHECK" 1 "${SARGS[@]}" >/dev/null 2>"$RUN_DIR/shrunk.err" && break
        need=$(needing "$RUN_DIR/shrunk.err" "$ref $also")
        pp_only=""
        for f in $(needing "$RUN_DIR/shrunk.err" "--pipeline-model-parallel-size"); do
            [[ " $need " == *" $f "* ]] || pp_only="${pp_only:+$pp_only }$f"
        done
        [ -n "$need$pp_only" ] || break
        also="${also:+$also }$need" solo="${solo:+$solo }$pp_only"
        shrink single 1 1 "$RUN_DIR" "$ref $also $solo"
    done
    ref="${ref:+$ref }$also"
    one_ref="$ref${solo:+${ref:+ }$solo}"
    start one "$name shrunk${one_ref:+ without $one_ref} trains 3 iterations on one rank" single 1
    parallel=""
    tp=$(value_of --tensor-model-parallel-size) pp=$(value_of --pipeline-model-parallel-size)
    CPS=$(value_of --context-parallel-size)
    tp=${tp:-1} pp=${pp:-1} CPS=${CPS:-1}
    [[ " $ref " == *" --context-parallel-size"* ]] && CPS=1
    if [ "$tp" -gt 1 ] || [ "$pp" -gt 1 ] || [ "$CPS" -gt 1 ]; then
        while [ $((tp * pp * CPS)) -gt 4 ]; do
            if [ "$pp" -ge "$tp" ] && [ "$pp" -gt 1 ]; then pp=$((pp / 2))
            elif [ "$tp" -gt 1 ]; then tp=$((tp / 2))
            else CPS=$((CPS / 2)); fi
        done
        np=$((tp * pp * CPS)) cpw=""
        [ "$CPS" -gt 1 ] && cpw=" cp $CPS"
        if ! have_mpirun; then
            parallel="skip"
        else
            shrink parallel "$tp" "$pp" "$RUN_DIR" "$ref"
            start mp "$name shrunk at tp $tp pp $pp$cpw trains 3 iterations on $np ranks" parallel $np
            parallel="run"
        fi
    fi
    finish one
    case $parallel in
    run) finish mp ;;
    skip) skip "$name shrunk at tp $tp pp $pp$cpw" "mpirun is not installed (scripts/install-deps.sh installs OpenMPI)" ;;
    esac
    rm -rf "$RUN_DIR"
done
echo "recipes: $starts of $total start as written"
check "at least 30 recipes" test "$total" -ge 30 -o -n "${RECIPES:-}"
