#!/usr/bin/env bash
# HuggingFaceTokenizer and TikTokenizer: `megatron-c preprocess-data` on every document
# of tinyshakespeare.jsonl and on a stress set, id for id against the Python packages' own
# encodings (tokenizers, tiktoken; test/ref/bpe_tokenizers_ref.py) for the fixtures of
# test/fixtures/tokenizers/ (Llama 3, Qwen2, Mistral NeMo and GPT-2 styles, a tiktoken vocabulary with
# both patterns); optionally byte for byte against Megatron's own tools/preprocess_data.py
# (core_v0.15.0, run from a mirror of Megatron-LM with build/venv-torch2's transformers);
# training on their data (vocabulary size and padding); refused inputs.
# The Python side needs tokenizers and tiktoken: build/venv-tok (scripts/install-deps.sh), else
# build/venv-torch2, else MC_TOK_PYTHON; without them those checks report # SKIP.
# ci-sanitize: tokenizer.json and tiktoken files parsed
source "$(dirname "$0")/lib.sh"

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
: "${MEGATRON_C_SHARED:=$ROOT/../shared}"
JSONL=$MEGATRON_C_SHARED/data/text/tinyshakespeare.jsonl
FX=$ROOT/test/fixtures/tokenizers
REF=$ROOT/test/ref/bpe_tokenizers_ref.py
PP=("$MC_BIN" preprocess-data --workers 2 --log-interval 100000000)

PY=""
for p in "${MC_TOK_PYTHON:-}" "$ROOT/build/venv-tok/bin/python" "$ROOT/build/venv-torch2/bin/python"; do
    if [ -n "$p" ] && [ -x "$p" ] && "$p" -c 'import tokenizers, tiktoken' 2>/dev/null; then
        PY=$p
        break
    fi
done
NOPY="no Python with tokenizers and tiktoken (scripts/install-deps.sh makes build/venv-tok)"
[ -z "$PY" ] || "$PY" "$REF" stress "$MC_TMP/stress.jsonl" >/dev/null

# same NAME KIND MODEL INPUT FLAGS...: preprocess-data with FLAGS, then the Python comparison.
same() {
    local name=$1 kind=$2 model=$3 input=$4 out=$MC_TMP/o_$RANDOM
    shift 4
    if [ -z "$PY" ]; then skip "$name" "$NOPY"; return; fi
    local pyflags=() a
    for a in "$@"; do
        case $a in --legacy-tokenizer | --append-eod) [ "$a" = --append-eod ] && pyflags+=(--append-eod) ;; esac
    done
    if ! "${PP[@]}" --input "$input" --output-prefix "$out" --tokenizer-model "$model" "$@" \
        >"$MC_TMP/pp.log" 2>&1; then
        not_ok "$name (preprocess-data: $(tail -1 "$MC_TMP/pp.log"))"
        return
    fi
    if "$PY" "$REF" check --kind "$kind" --model "$model" --jsonl "$input" \
        --prefix "${out}_text_document" "${pyflags[@]}" "${TT_REF[@]}" >"$MC_TMP/ref.log" 2>&1; then
        ok "$name ($(tail -1 "$MC_TMP/ref.log"))"
    else
        not_ok "$name: $(head -c 600 "$MC_TMP/ref.log")"
    fi
}

HF=(--tokenizer-type HuggingFaceTokenizer)
TT_REF=()
for style in llama3 qwen2 nemo; do
    same "$style: tinyshakespeare, --append-eod" hf "$FX/$style" "$JSONL" "${HF[@]}" --append-eod
    same "$style: stress set" hf "$FX/$style" "$MC_TMP/stress.jsonl" "${HF[@]}"
done
same "gpt2style (ByteLevel's own regex): stress set" hf "$FX/gpt2style" "$MC_TMP/stress.jsonl" "${HF[@]}"
same "llama3 --legacy-tokenizer: the post-processor's BOS" hf-legacy "$FX/llama3" \
    "$MC_TMP/stress.jsonl" "${HF[@]}" --legacy-tokenizer
same "nemo --legacy-tokenizer: <s>" hf-legacy "$FX/nemo" "$JSONL" "${HF[@]}" --legacy-tokenizer
same "qwen2 --legacy-tokenizer: no BOS" hf-legacy "$FX/qwen2" "$JSONL" "${HF[@]}" --legacy-tokenizer

# The vocabulary has 2003 ranks: 100 special tokens + 2003 = 2103 (2**17, the default, would
# need more ranks than the file has; Megatron asserts the same).
for pat in v1 v2; do
    TT=(--tokenizer-type TikTokenizer --tiktoken-pattern $pat --vocab-size 2103
        --tiktoken-num-special-tokens 100)
    TT_REF=(--pattern $pat --vocab-size 2103 --num-special 100)
    same "TikTokenizer $pat: tinyshakespeare, --append-eod" tiktoken "$FX/tiktoken.json" "$JSONL" \
        "${TT[@]}" --append-eod
    same "TikTokenizer $pat: stress set" tiktoken "$FX/tiktoken.json" "$MC_TMP/stress.jsonl" "${TT[@]}"
done
TT_REF=(--pattern v2 --vocab-size 1100 --num-special 100)
same "TikTokenizer: the vocabulary cut to --vocab-size - special tokens" tiktoken \
    "$FX/tiktoken.json" "$MC_TMP/stress.jsonl" --tokenizer-type TikTokenizer \
    --tiktoken-pattern v2 --vocab-size 1100 --tiktoken-num-special-tokens 100
TT_REF=()

# ---- Megatron's own preprocess_data.py (optional) ----
megatron_src() { # unpacks core_v0.15.0's megatron/ and tools/ into $MC_TMP/mlm
    local g
    for g in "${MC_MEGATRON_GIT:-}" "$ROOT/../.mirror/NVIDIA+Megatron-LM/repo" \
        "$ROOT/../../.mirror/NVIDIA+Megatron-LM/repo"; do
        [ -n "$g" ] && [ -d "$g" ] || continue
        mkdir -p "$MC_TMP/mlm" &&
            git --git-dir="$g" archive core_v0.15.0 megatron tools 2>/dev/null | tar -x -C "$MC_TMP/mlm" &&
            return 0
    done
    return 1
}
same_files() { # A B: $MC_TMP/{A,B}_text_document.{bin,idx} are identical
    cmp -s "$MC_TMP/$1_text_document.bin" "$MC_TMP/$2_text_document.bin" &&
        cmp -s "$MC_TMP/$1_text_document.idx" "$MC_TMP/$2_text_document.idx"
}
MPY=$ROOT/build/venv-torch2/bin/python
if ! [ -x "$MPY" ] || ! "$MPY" -c 'import torch, transformers, tiktoken' 2>/dev/null; then
    skip "Megatron's preprocess_data.py: identical .bin/.idx" "build/venv-torch2 with torch and transformers missing"
elif ! megatron_src; then
    skip "Megatron's preprocess_data.py: identical .bin/.idx" "no Megatron-LM mirror (MC_MEGATRON_GIT)"
else
    mkdir -p "$MC_TMP/shim" # megatron.training.tokenizer imports six, which that venv lacks
    SIX=$(/usr/bin/python3 -c 'import six; print(six.__file__)' 2>/dev/null) && ln -s "$SIX" "$MC_TMP/shim/six.py"
    head -n 2000 "$JSONL" >"$MC_TMP/part.jsonl"
    for run in "llama3|${HF[*]} --tokenizer-model $FX/llama3 --append-eod" \
        "tiktoken v2|--tokenizer-type TikTokenizer --tiktoken-pattern v2 --vocab-size 3003 --tokenizer-model $FX/tiktoken.json"; do
        name=${run%%|*}
        read -ra flags <<<"${run#*|}"
        TORCH_CUDA_ARCH_LIST=9.0 PYTHONPATH="$MC_TMP/mlm:$MC_TMP/shim" "$MPY" "$MC_TMP/mlm/tools/preprocess_data.py" \
            --input "$MC_TMP/part.jsonl" --output-prefix "$MC_TMP/mg" --workers 1 "${flags[@]}" >"$MC_TMP/mg.log" 2>&1
        rc=$?
        "${PP[@]}" --input "$MC_TMP/part.jsonl" --output-prefix "$MC_TMP/mc" "${flags[@]}" >/dev/null 2>&1
        if [ $rc -ne 0 ]; then
            not_ok "Megatron's preprocess_data.py, $name: it failed: $(tail -1 "$MC_TMP/mg.log")"
        else
            check "Megatron's preprocess_data.py, $name: identical .bin/.idx" same_files mg mc
        fi
    done
fi

# ---- training on their data: the tokenizer's vocabulary, padded as Megatron pads ----
MODEL=(--data-cache-path "$MC_TMP/cache" --device cpu --num-layers 1 --hidden-size 32
       --num-attention-heads 2 --seq-length 32 --max-position-embeddings 32 --micro-batch-size 2
       --global-batch-size 4 --train-iters 2 --lr 3e-3 --log-interval 1 --eval-iters 0 --seed 7
       --split 90,8,2)
"${PP[@]}" --input "$JSONL" --output-prefix "$MC_TMP/tr_hf" "${HF[@]}" --tokenizer-model "$FX/llama3" \
    --append-eod >/dev/null 2>&1
"$MC_BIN" "${MODEL[@]}" "${HF[@]}" --tokenizer-model "$FX/llama3" \
    --data-path "$MC_TMP/tr_hf_text_document" >"$MC_TMP/run" 2>"$MC_TMP/err"
check "HuggingFaceTokenizer trains (exit 0)" test $? -eq 0
check "HuggingFaceTokenizer: len(tokenizer) 2002 padded to 2048" \
    grep -q '^ > padded vocab (size: 2002) with 46 dummy tokens (new size: 2048)$' "$MC_TMP/run"
TT=(--tokenizer-type TikTokenizer --tiktoken-pattern v1 --vocab-size 2103
    --tiktoken-num-special-tokens 100 --tokenizer-model "$FX/tiktoken.json")
"${PP[@]}" --input "$JSONL" --output-prefix "$MC_TMP/tr_tt" "${TT[@]}" --append-eod >/dev/null 2>&1
"$MC_BIN" "${MODEL[@]}" "${TT[@]}" --data-path "$MC_TMP/tr_tt_text_document" >"$MC_TMP/run" 2>"$MC_TMP/err"
check "TikTokenizer trains (exit 0)" test $? -eq 0
check "TikTokenizer: --vocab-size 2103 padded to 2176" \
    grep -q '^ > padded vocab (size: 2103) with 73 dummy tokens (new size: 2176)$' "$MC_TMP/run"

# ---- refused inputs: one line naming what is wrong ----
P=(preprocess-data --input "$JSONL" --output-prefix "$MC_TMP/x" --workers 1)
expect_user_error "HuggingFaceTokenizer without --tokenizer-model" 'HuggingFaceTokenizer needs --tokenizer-model' \
    "${P[@]}" "${HF[@]}"
expect_user_error "a directory without tokenizer.json" 'cannot read .*/tokenizer.json' \
    "${P[@]}" "${HF[@]}" --tokenizer-model "$MC_TMP"
mkdir -p "$MC_TMP/wp"
printf '{"model": {"type": "WordPiece", "vocab": {"a": 0}}, "pre_tokenizer": null}' >"$MC_TMP/wp/tokenizer.json"
expect_user_error "a WordPiece model is refused by name" "model type 'WordPiece' is not supported" \
    "${P[@]}" "${HF[@]}" --tokenizer-model "$MC_TMP/wp"
mkdir -p "$MC_TMP/nfkc"
sed 's/"normalizer":{"type":"NFC"}/"normalizer":{"type":"NFKC"}/' "$FX/qwen2/tokenizer.json" >"$MC_TMP/nfkc/tokenizer.json"
cp "$FX/qwen2/tokenizer_config.json" "$MC_TMP/nfkc/"
expect_user_error "an NFKC normalizer is refused by name" "normalizer 'NFKC' is not supported" \
    "${P[@]}" "${HF[@]}" --tokenizer-model "$MC_TMP/nfkc"
mkdir -p "$MC_TMP/noeos"
cp "$FX/llama3/tokenizer.json" "$MC_TMP/noeos/"
expect_user_error "no eos_token" 'no eos_token in tokenizer_config.json' \
    "${P[@]}" "${HF[@]}" --tokenizer-model "$MC_TMP/noeos"
expect_user_error "TikTokenizer without --tiktoken-pattern" 'needs --tiktoken-pattern v1 or v2' \
    "${P[@]}" --tokenizer-type TikTokenizer --tokenizer-model "$FX/tiktoken.json"
expect_user_error "TikTokenizer: the default vocab size needs 2**17 - 1000 ranks" \
    'expected a JSON list of at least 130072 ranks' \
    "${P[@]}" --tokenizer-type TikTokenizer --tokenizer-model "$FX/tiktoken.json" --tiktoken-pattern v1
expect_user_error "TikTokenizer: special tokens must include </s>" 'must include <unk>, <s> and </s>' \
    "${P[@]}" --tokenizer-type TikTokenizer --tokenizer-model "$FX/tiktoken.json" --tiktoken-pattern v1 \
    --vocab-size 2103 --tiktoken-num-special-tokens 100 --tiktoken-special-tokens '<unk>' '<s>'
expect_user_error "training: TikTokenizer without --tiktoken-pattern" 'required: --tiktoken-pattern' \
    "${MODEL[@]}" --tokenizer-type TikTokenizer --tokenizer-model "$FX/tiktoken.json" \
    --data-path "$MC_TMP/tr_tt_text_document"
