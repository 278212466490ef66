#!/usr/bin/env bash
# Optional: megatron-c's preprocess-data with the SentencePiece tokenizers against Megatron-LM
# core_v0.15.0's own code, byte for byte, on every tinyshakespeare document plus the stress set:
# tools/preprocess_data.py itself (the default tokenizer system) and, for --legacy-tokenizer
# (which core_v0.15.0's script cannot run: its Encoder never keeps the tokenizer), Megatron's
# legacy classes with its IndexedDatasetBuilder (test/ref/megatron_sp_check.py). Skips unless
# Megatron-LM's git repository (MC_MEGATRON_GIT), build/venv-torch2 (scripts/install-deps.sh
# --torch2), build/venv-tok's pinned sentencepiece and Debian's python3-six are all there.
source "$(dirname "$0")/lib.sh"

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
: "${MEGATRON_C_SHARED:=$ROOT/../shared}"
GIT=${MC_MEGATRON_GIT:-/work/.mirror/NVIDIA+Megatron-LM/repo}
TORCH_PY=${MC_TORCH_PYTHON:-$ROOT/build/venv-torch2/bin/python}
SP_PKG=$ROOT/build/venv-tok/lib/python3.11/site-packages/sentencepiece
SIX=/usr/lib/python3/dist-packages/six.py
FIX=${MC_FIXTURES:-$ROOT/test/fixtures}/tokenizers
NAME="preprocess-data with SentencePiece == Megatron-LM core_v0.15.0"

why=""
git --git-dir="$GIT" rev-parse -q --verify core_v0.15.0 >/dev/null 2>&1 || why="no Megatron-LM git repository with core_v0.15.0 at $GIT (MC_MEGATRON_GIT)"
[ -n "$why" ] || "$TORCH_PY" -c 'import torch, numpy' 2>/dev/null || why="no $TORCH_PY with torch (scripts/install-deps.sh --torch2)"
[ -n "$why" ] || [ -d "$SP_PKG" ] || why="no pinned sentencepiece in build/venv-tok (scripts/install-deps.sh)"
[ -n "$why" ] || [ -f "$SIX" ] || why="no $SIX (Debian's python3-six; Megatron's BERT tokenizer imports it)"
if [ -n "$why" ]; then
    skip "$NAME" "$why"
    exit 0
fi
mkdir -p "$MC_TMP/mlm" "$MC_TMP/shim"
git --git-dir="$GIT" archive core_v0.15.0 megatron tools | tar -x -C "$MC_TMP/mlm"
ln -s "$SIX" "$MC_TMP/shim/six.py"
ln -s "$SP_PKG" "$MC_TMP/shim/sentencepiece" # the version megatron-c's library agrees with
"$TORCH_PY" "$ROOT/test/ref/sp_tokenizer_ref.py" stress "$MC_TMP/stress.jsonl"
cat "$MEGATRON_C_SHARED/data/text/tinyshakespeare.jsonl" "$MC_TMP/stress.jsonl" >"$MC_TMP/all.jsonl"

# Each case: megatron-c writes o<i>_text_document, and one Megatron process (imported once)
# writes m<i>_text_document; then each pair is compared byte for byte.
# case DESCRIPTION MODEL TYPE [legacy [EXTRA_IDS]]
NAMES=() JOBS=()
case_() {
    local i=${#NAMES[@]} what=$1 model=$FIX/$2 type=$3 legacy=${4:-} extra=${5:-0} flags=()
    [ -n "$legacy" ] && flags=(--legacy-tokenizer --vocab-extra-ids "$extra")
    NAMES+=("$what")
    "$MC_BIN" preprocess-data --input "$MC_TMP/all.jsonl" --output-prefix "$MC_TMP/o$i" --workers 2 \
        --append-eod --tokenizer-type "$type" --tokenizer-model "$model" "${flags[@]}" >"$MC_TMP/mc$i.log" 2>&1
    [ ${#JOBS[@]} -eq 0 ] || JOBS+=(::)
    if [ -n "$legacy" ]; then
        JOBS+=(legacy --type "$type" --model "$model" --extra-ids "$extra" --input "$MC_TMP/all.jsonl"
               --output-prefix "$MC_TMP/m$i")
    else
        JOBS+=(preprocess --input "$MC_TMP/all.jsonl" --output-prefix "$MC_TMP/m$i" --workers 2
               --append-eod --tokenizer-type "$type" --tokenizer-model "$model")
    fi
}
case_ "GPTSentencePieceTokenizer, BPE with byte fallback" sp_bpe_bytefallback.model GPTSentencePieceTokenizer
case_ "Llama2Tokenizer" sp_bpe_bytefallback.model Llama2Tokenizer
case_ "SentencePieceTokenizer, unigram" sp_unigram.model SentencePieceTokenizer
case_ "legacy SentencePieceTokenizer, unigram, 12 extra ids" sp_unigram.model SentencePieceTokenizer legacy 12
case_ "legacy SentencePieceTokenizer, BPE" sp_bpe_bytefallback.model SentencePieceTokenizer legacy
case_ "legacy Llama2Tokenizer" sp_bpe_bytefallback.model Llama2Tokenizer legacy
(cd "$MC_TMP" && PYTHONPATH=$MC_TMP/shim "$TORCH_PY" "$ROOT/test/ref/megatron_sp_check.py" "$MC_TMP/mlm" "${JOBS[@]}") \
    >"$MC_TMP/meg.log" 2>&1 || not_ok "$NAME: Megatron failed: $(tail -c 300 "$MC_TMP/meg.log")"
for i in "${!NAMES[@]}"; do
    o=$MC_TMP/o${i}_text_document m=$MC_TMP/m${i}_text_document
    if [ ! -s "$o.idx" ]; then
        not_ok "$NAME: ${NAMES[$i]} (megatron-c failed: $(tail -c 300 "$MC_TMP/mc$i.log"))"
    elif cmp -s "$o.bin" "$m.bin" && cmp -s "$o.idx" "$m.idx"; then
        ok "$NAME: ${NAMES[$i]}"
    else
        not_ok "$NAME: ${NAMES[$i]} ($(cmp "$o.bin" "$m.bin" 2>&1 | head -c 200))"
    fi
done
