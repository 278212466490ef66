#!/usr/bin/env bash
# The Hugging Face bridge: export-hf and import-hf for a tiny GPT (GPT2LMHeadModel:
# tied, biases, tanh GeLU) and a tiny Llama (LlamaForCausalLM: GQA, SwiGLU, RMSNorm, rope,
# untied), each trained 3 iterations at tp1pp1 and at tp2pp2 under mpirun (the GPT's in
# torch_dist, the Llama's with virtual stages); tiny MoE models as MixtralForCausalLM and
# Qwen3MoeForCausalLM (round trips through pp2 and torch_dist, refusals by name):
#  - the exported files, opened by the safetensors package (build/venv-hf, made by
#    scripts/install-deps.sh; those checks skip without it), hold the checkpoint's tensors
#    (test/integration/hf_check.py takes Megatron's fused tensors apart itself);
#  - imported at another layout (and in torch_dist) and exported again: the same bytes; sharded
#    with --max-shard-size and an index, imported back: the same bytes again;
#  - training continues from the imported checkpoint: its first loss equals the original's with
#    --finetune (a vocabulary without padding rows; padding rows are refilled on import), and at
#    tp2pp2 it gives the tp1pp1 import's losses;
#  - Megatron-LM's own tp2pp1 torch_dist checkpoint (shared/data/megatron-ref) exports;
#  - refusals: exit 2, one line naming the option or the file;
#  - optional, with torch 2.x and transformers ($MC_TORCH2_PYTHON, or $MC_TORCH2_VENV or
#    build/venv-torch2; skipped without them): transformers' logits of both exported models equal
#    megatron-c's forward (test/tools/hf_logits) to 1e-4 (also with rope scaling, a tied Llama
#    with biases, an untied GPT with erf GeLU, Mixtral and Qwen3-MoE); tiny models transformers
#    itself saved (GPT-2 and Llama at tp2, Mixtral and Qwen3-MoE at tp1) import, export again to
#    the same tensors, and give transformers' logits.
# ci-sanitize: safetensors and Hugging Face config files read and written
set -uo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TOOLS=${MC_BUILD:-$ROOT/build/rel}/test/tools
HF_PY=${MC_HF_PYTHON:-$ROOT/build/venv-hf/bin/python}
TORCH_PY=${MC_TORCH2_PYTHON:-${MC_TORCH2_VENV:-$ROOT/build/venv-torch2}/bin/python}
CHECK=$ROOT/test/integration/hf_check.py
T=$MC_TMP

MODEL_FLAGS=(--device cpu --mock-data --make-vocab-size-divisible-by 16 --num-layers 4
      --hidden-size 32 --num-attention-heads 4 --ffn-hidden-size 48 --seq-length 32
      --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --lr 3e-3
      --log-interval 1 --eval-iters 0 --seed 1234 --hidden-dropout 0 --attention-dropout 0
      --log-params-norm)
BASE=("${MODEL_FLAGS[@]}" --vocab-size 250)
GPT=()
LLAMA=(--position-embedding-type rope --normalization RMSNorm --swiglu --group-query-attention
       --num-query-groups 2 --untie-embeddings-and-output-weights --disable-bias-linear)
PAR=(--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2)

have_hf_py=0
if "$HF_PY" -c 'import safetensors.numpy, numpy' 2>/dev/null; then have_hf_py=1; fi
HF_WHY="no safetensors package at $HF_PY (scripts/install-deps.sh makes build/venv-hf)"

# same_bytes NAME A B: model.safetensors and config.json of two exports are the same bytes
same_bytes() {
    check "$1" bash -c "cmp -s '$2/model.safetensors' '$3/model.safetensors' &&
                        cmp -s '$2/config.json' '$3/config.json'"
}
# last_line FILE: its last line, for a TAP line
last_line() { tail -1 "$1" | tail -c 200; }
# first_loss LOG: the lm loss of the first logged iteration
first_loss() { log_numbers "$1" | head -1 | cut -d' ' -f1; }

for m in gpt llama; do
    if [ $m = gpt ]; then MODEL=(${GPT[@]+"${GPT[@]}"}) PAR_EXTRA=(--ckpt-format torch_dist)
    else MODEL=("${LLAMA[@]}") PAR_EXTRA=(--num-layers-per-virtual-pipeline-stage 1); fi
    "$MC_BIN" "${BASE[@]}" "${MODEL[@]}" --train-iters 3 --save "$T/ck_${m}1" --save-interval 3 \
        >"$T/${m}1.log" 2>&1
    check "$m: trains at tp1pp1 and saves (rc=$?)" test -f "$T/ck_${m}1/latest_checkpointed_iteration.txt"
    mpirun_mc 4 "${BASE[@]}" "${MODEL[@]}" "${PAR[@]}" "${PAR_EXTRA[@]}" --train-iters 3 \
        --save "$T/ck_${m}4" --save-interval 3 >"$T/${m}4.log" 2>&1
    check "$m: trains at tp2pp2 (${PAR_EXTRA[*]}) and saves" test -f "$T/ck_${m}4/latest_checkpointed_iteration.txt"
    for l in 1 4; do
        "$MC_BIN" export-hf --load "$T/ck_$m$l" --output "$T/hf_$m$l" >"$T/exp.out" 2>&1
        check "$m: export-hf from the tp$([ $l = 1 ] && echo 1pp1 || echo 2pp2) checkpoint ($(last_line "$T/exp.out"))" \
            test -f "$T/hf_$m$l/model.safetensors" -a -f "$T/hf_$m$l/config.json" -a -f "$T/hf_$m$l/generation_config.json"
    done
    want=$([ $m = gpt ] && echo GPT2LMHeadModel || echo LlamaForCausalLM)
    check "$m: config.json names $want" grep -q "\"$want\"" "$T/hf_${m}1/config.json"

    # the tensors, by the safetensors package, against the checkpoint (tp2pp2: converted to tp1pp1
    # by convert-checkpoint, then dumped)
    "$MC_BIN" convert-checkpoint --load-dir "$T/ck_${m}4" --save-dir "$T/cv_${m}4" \
        --target-tensor-parallel-size 1 --target-pipeline-parallel-size 1 \
        --target-ckpt-format torch >/dev/null 2>&1
    for l in 1 4; do
        dir=$([ $l = 1 ] && echo "$T/ck_${m}1" || echo "$T/cv_${m}4")
        if [ $have_hf_py = 0 ]; then
            skip "$m tp$l: the safetensors package reads the checkpoint's tensors" "$HF_WHY"
            continue
        fi
        "$TOOLS/ckpt_tool" dump "$dir"/iter_0000003/mp_rank_00/model_optim_rng.pt >"$T/dump.json"
        out=$("$HF_PY" "$CHECK" tensors "$T/hf_$m$l" "$T/dump.json" 2>&1)
        check "$m ($([ $l = 1 ] && echo tp1pp1 || echo tp2pp2)): the safetensors package reads the checkpoint's tensors ($out)" \
            test "${out% tensors*}" -gt 0 2>/dev/null
    done

    # round trips: HF -> megatron-c at another layout -> HF gives the same bytes
    "$MC_BIN" import-hf --hf-dir "$T/hf_${m}1" --save "$T/imp_${m}4" "${PAR[@]}" >"$T/imp.out" 2>&1
    check "$m: import-hf at tp2pp2 ($(last_line "$T/imp.out"))" test -d "$T/imp_${m}4/release/mp_rank_01_001"
    "$MC_BIN" export-hf --load "$T/imp_${m}4" --output "$T/re_${m}1" >/dev/null 2>&1
    same_bytes "$m: tp1pp1 -> HF -> tp2pp2 -> HF: the same bytes" "$T/hf_${m}1" "$T/re_${m}1"
    "$MC_BIN" import-hf --hf-dir "$T/hf_${m}4" --save "$T/imp_${m}1" --ckpt-format torch_dist \
        >/dev/null 2>&1
    "$MC_BIN" export-hf --load "$T/imp_${m}1" --output "$T/re_${m}4" >/dev/null 2>&1
    same_bytes "$m: tp2pp2 -> HF -> tp1pp1 torch_dist -> HF: the same bytes" "$T/hf_${m}4" "$T/re_${m}4"
    "$MC_BIN" export-hf --load "$T/ck_${m}1" --output "$T/sh_$m" --max-shard-size 20KB >/dev/null 2>&1
    n=$(ls "$T/sh_$m"/model-*-of-*.safetensors 2>/dev/null | wc -l)
    check "$m: --max-shard-size 20KB: $n shards and an index" test "$n" -gt 2 -a -f "$T/sh_$m/model.safetensors.index.json"
    if [ $have_hf_py = 1 ]; then
        "$TOOLS/ckpt_tool" dump "$T/ck_${m}1"/iter_0000003/mp_rank_00/model_optim_rng.pt >"$T/dump.json"
        out=$("$HF_PY" "$CHECK" tensors "$T/sh_$m" "$T/dump.json" 2>&1)
        check "$m: the shards and index read by the safetensors package ($(tail -1 <<<"$out"))" test "${out% tensors*}" -gt 0 2>/dev/null
    else
        skip "$m: the shards and index read by the safetensors package" "$HF_WHY"
    fi
    "$MC_BIN" import-hf --hf-dir "$T/sh_$m" --save "$T/imp_sh_$m" >/dev/null 2>&1
    "$MC_BIN" export-hf --load "$T/imp_sh_$m" --output "$T/re_sh_$m" >/dev/null 2>&1
    same_bytes "$m: sharded -> megatron-c -> HF: the unsharded export's bytes" "$T/hf_${m}1" "$T/re_sh_$m"

    # training continues from the imported weights. Megatron's loss is over the padded vocabulary,
    # whose rows past HF's the import fills as Megatron's converter does (copies of the last): a
    # vocabulary without padding (256) starts exactly at the original's first loss
    "$MC_BIN" "${BASE[@]}" "${MODEL[@]}" --vocab-size 256 --train-iters 1 --save "$T/ck256_$m" \
        --save-interval 1 >/dev/null 2>&1
    "$MC_BIN" export-hf --load "$T/ck256_$m" --output "$T/hf256_$m" >/dev/null 2>&1
    "$MC_BIN" import-hf --hf-dir "$T/hf256_$m" --save "$T/imp256_$m" >/dev/null 2>&1
    "$MC_BIN" "${BASE[@]}" "${MODEL[@]}" --vocab-size 256 --train-iters 2 --load "$T/ck256_$m" \
        --finetune --no-load-optim --no-load-rng >"$T/ft.log" 2>&1
    "$MC_BIN" "${BASE[@]}" --vocab-size 256 --use-checkpoint-args --train-iters 2 --load "$T/imp256_$m" \
        >"$T/on.log" 2>&1
    a=$(first_loss "$T/ft.log") b=$(first_loss "$T/on.log")
    check "$m: training from the import (--use-checkpoint-args) starts at the original's loss ($a, $b)" \
        test -n "$a" -a "$a" = "$b"
    # and at another layout: the tp2pp2 import continues as the tp1pp1 one
    "$MC_BIN" import-hf --hf-dir "$T/hf_${m}1" --save "$T/imp1_$m" >/dev/null 2>&1
    "$MC_BIN" "${BASE[@]}" "${MODEL[@]}" --train-iters 2 --load "$T/imp1_$m" >"$T/on1.log" 2>&1
    mpirun_mc 4 "${BASE[@]}" "${MODEL[@]}" "${PAR[@]}" --train-iters 2 --load "$T/imp_${m}4" \
        >"$T/on4.log" 2>&1
    check "$m: training from the tp2pp2 import gives the tp1pp1 import's losses" \
        same_log_numbers "$T/on1.log" "$T/on4.log" 2
done

# ---- rope scaling: Llama 3.1's (--use-rope-scaling) and linear (interpolation) ----
# (a large init and rotary base, so that the logits check below tells scaled from unscaled)
ROPE_LLAMA3=(--use-rope-scaling --rope-scaling-factor 8 --rotary-base 500000)
ROPE_LINEAR=(--rotary-seq-len-interpolation-factor 2)
for r in llama3 linear; do
    if [ $r = llama3 ]; then ROPE=("${ROPE_LLAMA3[@]}"); else ROPE=("${ROPE_LINEAR[@]}"); fi
    "$MC_BIN" "${BASE[@]}" "${LLAMA[@]}" "${ROPE[@]}" --num-layers 2 --init-method-std 0.5 \
        --train-iters 1 --save "$T/ck_$r" --save-interval 1 >/dev/null 2>&1
    "$MC_BIN" export-hf --load "$T/ck_$r" --output "$T/hf_$r" >/dev/null 2>&1
    "$MC_BIN" import-hf --hf-dir "$T/hf_$r" --save "$T/imp_$r" --tensor-model-parallel-size 2 >/dev/null 2>&1
    "$MC_BIN" export-hf --load "$T/imp_$r" --output "$T/re_$r" >/dev/null 2>&1
    check "rope scaling $r: rope_type $r written" grep -q "\"rope_type\": \"$r\"" "$T/hf_$r/config.json"
    same_bytes "rope scaling $r: HF -> tp2 -> HF: the same bytes" "$T/hf_$r" "$T/re_$r"
done

# ---- MoE: MixtralForCausalLM (every layer MoE, top-k renormalised: Megatron's default routing)
# and Qwen3MoeForCausalLM (--qk-layernorm; --moe-router-pre-softmax: norm_topk_prob false), 2 layers,
# 4 experts, top-2; a large init so that routing and the q/k norms show in the logits check below ----
MOE=("${BASE[@]}" "${LLAMA[@]}" --num-layers 2 --init-method-std 0.2 --num-experts 4 --moe-router-topk 2
     --moe-ffn-hidden-size 24)
for k in mxt qw3; do
    if [ $k = mxt ]; then EXTRA=() want=MixtralForCausalLM IMP=(--pipeline-model-parallel-size 2)
    else EXTRA=(--qk-layernorm --moe-router-pre-softmax --kv-channels 16) want=Qwen3MoeForCausalLM IMP=(--ckpt-format torch_dist); fi
    "$MC_BIN" "${MOE[@]}" ${EXTRA[@]+"${EXTRA[@]}"} --train-iters 1 --save "$T/ck_$k" --save-interval 1 >/dev/null 2>&1
    "$MC_BIN" export-hf --load "$T/ck_$k" --output "$T/hf_$k" >"$T/exp.out" 2>&1
    check "moe $k: exported as $want ($(head -1 "$T/exp.out" | cut -c1-120))" grep -q "\"$want\"" "$T/hf_$k/config.json"
    if [ $have_hf_py = 1 ]; then
        "$TOOLS/ckpt_tool" dump "$T/ck_$k"/iter_0000001/mp_rank_00/model_optim_rng.pt >"$T/dump.json"
        out=$("$HF_PY" "$CHECK" tensors "$T/hf_$k" "$T/dump.json" 2>&1)
        check "moe $k: the router's and experts' tensors read by the safetensors package ($out)" test "${out% tensors*}" -gt 0 2>/dev/null
    else
        skip "moe $k: the router's and experts' tensors read by the safetensors package" "$HF_WHY"
    fi
    "$MC_BIN" import-hf --hf-dir "$T/hf_$k" --save "$T/imp_$k" "${IMP[@]}" >"$T/imp.out" 2>&1
    "$MC_BIN" export-hf --load "$T/imp_$k" --output "$T/re_$k" >/dev/null 2>&1
    same_bytes "moe $k: HF -> megatron-c (${IMP[*]}) -> HF: the same bytes ($(last_line "$T/imp.out"))" "$T/hf_$k" "$T/re_$k"
done
"$MC_BIN" "${MOE[@]}" "${EXTRA[@]}" --load "$T/imp_qw3" --train-iters 1 >"$T/on_qw3.log" 2>&1
check "moe qw3: training continues from the torch_dist import ($(grep -o 'lm loss: [^|]*' "$T/on_qw3.log"))" grep -q "iteration        1/" "$T/on_qw3.log"
# refused by name: routing Mixtral lacks, Qwen2-MoE's shared experts, dense layers among MoE ones, tp
"$MC_BIN" "${MOE[@]}" --moe-router-pre-softmax --train-iters 1 --save "$T/ck_moepre" --save-interval 1 >/dev/null 2>&1
expect_user_error "export-hf refuses --moe-router-pre-softmax without --qk-layernorm (Mixtral renormalises)" "moe-router-pre-softmax" export-hf --load "$T/ck_moepre" --output "$T/x"
mkdir -p "$T/moe_q2" && cp "$T/hf_qw3/model.safetensors" "$T/moe_q2/" && sed 's/Qwen3MoeForCausalLM/Qwen2MoeForCausalLM/' "$T/hf_qw3/config.json" >"$T/moe_q2/config.json"
expect_user_error "import-hf refuses Qwen2MoeForCausalLM by name (shared experts)" "Qwen2MoeForCausalLM .*not implemented yet" import-hf --hf-dir "$T/moe_q2" --save "$T/x"
mkdir -p "$T/moe_q3" && cp "$T/hf_qw3/model.safetensors" "$T/moe_q3/" && sed 's/"mlp_only_layers": \[\]/"mlp_only_layers": [1]/' "$T/hf_qw3/config.json" >"$T/moe_q3/config.json"
expect_user_error "import-hf refuses mlp_only_layers (dense layers among MoE layers) by name" "mlp_only_layers" import-hf --hf-dir "$T/moe_q3" --save "$T/x"
expect_user_error "import-hf refuses an MoE model at tp 2, naming the flag" "tensor-model-parallel-size 2" import-hf --hf-dir "$T/hf_mxt" --save "$T/x" --tensor-model-parallel-size 2

# ---- bf16: BF16 tensors, kept through a round trip ----
"$MC_BIN" "${BASE[@]}" --bf16 --num-layers 2 --train-iters 1 --save "$T/ck_bf16" --save-interval 1 >/dev/null 2>&1
"$MC_BIN" export-hf --load "$T/ck_bf16" --output "$T/hf_bf16" >"$T/exp.out" 2>&1
check "bf16: exported as BF16 ($(head -1 "$T/exp.out"))" grep -q '"torch_dtype": "bfloat16"' "$T/hf_bf16/config.json"
"$MC_BIN" import-hf --hf-dir "$T/hf_bf16" --save "$T/imp_bf16" --tensor-model-parallel-size 2 >/dev/null 2>&1
"$MC_BIN" export-hf --load "$T/imp_bf16" --output "$T/re_bf16" >/dev/null 2>&1
same_bytes "bf16: HF -> tp2 -> HF: the same bytes" "$T/hf_bf16" "$T/re_bf16"

# ---- the GPT-2 tokenizer's files travel with the model ----
GPT2_VOCAB=${MEGATRON_C_SHARED:-$ROOT/../shared}/data/gpt2/gpt2-vocab.json
GPT2_MERGES=${GPT2_VOCAB%/*}/gpt2-merges.txt
if [ -f "$GPT2_VOCAB" ] && [ -f "$GPT2_MERGES" ]; then
    "$MC_BIN" "${MODEL_FLAGS[@]}" --num-layers 1 --vocab-file "$GPT2_VOCAB" \
        --merge-file "$GPT2_MERGES" --train-iters 1 --save "$T/ck_tok" --save-interval 1 \
        >"$T/tok.log" 2>&1
    "$MC_BIN" export-hf --load "$T/ck_tok" --output "$T/hf_tok" >/dev/null 2>&1
    check "tokenizer: vocab.json and merges.txt exported, eos 50256, vocab_size 50257" bash -c "
        cmp -s '$GPT2_VOCAB' '$T/hf_tok/vocab.json' && cmp -s '$GPT2_MERGES' '$T/hf_tok/merges.txt' &&
        grep -q '\"eos_token_id\": 50256' '$T/hf_tok/generation_config.json' &&
        grep -q '\"vocab_size\": 50257' '$T/hf_tok/config.json'"
    "$MC_BIN" import-hf --hf-dir "$T/hf_tok" --save "$T/imp_tok" >/dev/null 2>&1
    "$MC_BIN" export-hf --load "$T/imp_tok" --output "$T/re_tok" >/dev/null 2>&1
    check "tokenizer: kept in the imported checkpoint, exported again the same" bash -c "
        cmp -s '$T/imp_tok/tokenizer/vocab.json' '$GPT2_VOCAB' &&
        cmp -s '$T/hf_tok/vocab.json' '$T/re_tok/vocab.json' && cmp -s '$T/hf_tok/merges.txt' '$T/re_tok/merges.txt' &&
        cmp -s '$T/hf_tok/model.safetensors' '$T/re_tok/model.safetensors' &&
        cmp -s '$T/hf_tok/config.json' '$T/re_tok/config.json'"
else
    skip "the GPT-2 tokenizer's files travel with the model" "no $GPT2_VOCAB"
fi

# ---- HuggingFaceTokenizer's tokenizer.json and a SentencePiece model travel with the model too ----
FX=${MC_FIXTURES:-$ROOT/test/fixtures}/tokenizers
for k in hf sp; do
    if [ $k = hf ]; then TOK=(--tokenizer-type HuggingFaceTokenizer --tokenizer-model "$FX/llama3") files="tokenizer.json tokenizer_config.json"
    else TOK=(--tokenizer-type Llama2Tokenizer --tokenizer-model "$FX/sp_bpe_bytefallback.model") files=tokenizer.model; fi
    "$MC_BIN" "${MODEL_FLAGS[@]}" "${LLAMA[@]}" --num-layers 1 "${TOK[@]}" --train-iters 1 \
        --save "$T/ck_tok$k" --save-interval 1 >"$T/tok$k.log" 2>&1
    "$MC_BIN" export-hf --load "$T/ck_tok$k" --output "$T/hf_tok$k" >"$T/exp.out" 2>&1
    eod=$(sed -nE 's/.*"eos_token_id": ([0-9]+).*/\1/p' "$T/hf_tok$k/generation_config.json")
    voc=$(sed -nE 's/.*"vocab_size": ([0-9]+).*/\1/p' "$T/hf_tok$k/config.json")
    src=$([ $k = hf ] && echo "$FX/llama3/tokenizer.json" || echo "$FX/sp_bpe_bytefallback.model")
    check "tokenizer $k: ${files% *} exported as the trained one's, eos $eod, vocab_size $voc ($(last_line "$T/exp.out"))" \
        bash -c "cmp -s '$src' '$T/hf_tok$k/${files%% *}' && [ -n '$eod' ] && [ -n '$voc' ] && [ '$voc' -lt 2048 ]"
    "$MC_BIN" import-hf --hf-dir "$T/hf_tok$k" --save "$T/imp_tok$k" >"$T/imp.out" 2>&1
    "$MC_BIN" export-hf --load "$T/imp_tok$k" --output "$T/re_tok$k" >/dev/null 2>&1
    check "tokenizer $k: imported with the checkpoint ($(last_line "$T/imp.out")), exported again the same" bash -c "
        for f in $files model.safetensors config.json generation_config.json; do
            cmp -s '$T/hf_tok$k/'\$f '$T/re_tok$k/'\$f || exit 1; done"
    "$MC_BIN" --use-checkpoint-args --load "$T/imp_tok$k" --finetune --device cpu --mock-data \
        --micro-batch-size 2 --global-batch-size 8 --lr 3e-3 --train-iters 1 --log-interval 1 \
        --eval-iters 0 --seed 1234 >"$T/tokft$k.log" 2>&1
    check "tokenizer $k: training from the import builds its tokenizer ($(grep -m1 'building .* tokenizer' "$T/tokft$k.log"))" \
        grep -q "building $( [ $k = hf ] && echo HuggingFaceTokenizer || echo Llama2Tokenizer) tokenizer" "$T/tokft$k.log"
done

# ---- Megatron-LM's own torch_dist checkpoint (tp2pp1, shared/data/megatron-ref) ----
MREF=${MEGATRON_C_SHARED:-$ROOT/../shared}/data/megatron-ref/torch_dist/tp2pp1
if [ ! -d "$MREF" ]; then
    skip "Megatron-LM's torch_dist checkpoint exported" "no $MREF"
elif [ $have_hf_py = 0 ]; then
    skip "Megatron-LM's torch_dist checkpoint exported" "$HF_WHY"
else
    "$MC_BIN" export-hf --load "$MREF" --output "$T/hf_mref" >/dev/null 2>&1
    "$MC_BIN" convert-checkpoint --load-dir "$MREF" --save-dir "$T/cv_mref" \
        --target-tensor-parallel-size 1 --target-ckpt-format torch >/dev/null 2>&1
    "$TOOLS/ckpt_tool" dump "$T/cv_mref"/iter_0000010/mp_rank_00/model_optim_rng.pt >"$T/dump.json"
    out=$("$HF_PY" "$CHECK" tensors "$T/hf_mref" "$T/dump.json" 2>&1)
    check "Megatron-LM's tp2pp1 torch_dist checkpoint exported: $(tail -1 <<<"$out")" \
        test "${out% tensors*}" -gt 0 2>/dev/null
fi

# ---- refusals: exit 2, one line ----
"$MC_BIN" "${BASE[@]}" "${LLAMA[@]}" --qk-layernorm --train-iters 1 --save "$T/ck_qk" --save-interval 1 >/dev/null 2>&1
expect_user_error "export-hf refuses --qk-layernorm, naming it" "qk-layernorm" export-hf --load "$T/ck_qk" --output "$T/x"
"$MC_BIN" "${BASE[@]}" --position-embedding-type rope --train-iters 1 --save "$T/ck_mix" --save-interval 1 >/dev/null 2>&1
expect_user_error "export-hf refuses LayerNorm with rope, naming the norm" "normalization LayerNorm" export-hf --load "$T/ck_mix" --output "$T/x"
expect_user_error "export-hf refuses a bad --max-shard-size" "max-shard-size" export-hf --load "$T/ck_gpt1" --output "$T/x" --max-shard-size lots
expect_user_error "export-hf names a missing checkpoint" "latest_checkpointed_iteration" export-hf --load "$T/none" --output "$T/x"
mkdir -p "$T/bert" && echo '{"architectures": ["BertModel"], "vocab_size": 10}' >"$T/bert/config.json"
expect_user_error "import-hf refuses another class" "reads GPT2LMHeadModel, LlamaForCausalLM, MixtralForCausalLM" import-hf --hf-dir "$T/bert" --save "$T/x"
mkdir -p "$T/cut" && cp "$T/hf_gpt1/config.json" "$T/cut/" &&
    head -c 5000 "$T/hf_gpt1/model.safetensors" >"$T/cut/model.safetensors"
expect_user_error "import-hf refuses a truncated model.safetensors, naming it" "cut/model.safetensors: .*beyond" import-hf --hf-dir "$T/cut" --save "$T/x"
mkdir -p "$T/wide" && cp "$T/hf_gpt1/model.safetensors" "$T/wide/" &&
    sed 's/"n_embd": 32/"n_embd": 64/' "$T/hf_gpt1/config.json" >"$T/wide/config.json"
expect_user_error "import-hf names a tensor whose shape is not the config's" "has shape .* the config says" import-hf --hf-dir "$T/wide" --save "$T/x"
mkdir -p "$T/gqa" && cp "$T/hf_gpt1/model.safetensors" "$T/gqa/" &&
    sed 's/"activation_function": "gelu_new"/"activation_function": "relu"/' "$T/hf_gpt1/config.json" >"$T/gqa/config.json"
expect_user_error "import-hf refuses an activation Megatron lacks" "activation_function" import-hf --hf-dir "$T/gqa" --save "$T/x"
expect_user_error "import-hf refuses a layout the model does not divide" "tensor" import-hf --hf-dir "$T/hf_llama1" --save "$T/x" --tensor-model-parallel-size 3

# ---- optional: transformers' logits against megatron-c's forward ----
TOKENS=(1 5 7 9 100 200 3 249 0 17 42 128)
TOK100=(1 5 7 9 42 3 0 17 64 99)
if "$TORCH_PY" -c 'import torch, transformers, safetensors' 2>/dev/null; then
    # and the other variants: a tied Llama with biases, an untied GPT with erf GeLU
    "$MC_BIN" "${BASE[@]}" --position-embedding-type rope --normalization RMSNorm --swiglu \
        --group-query-attention --num-query-groups 2 --num-layers 2 --init-method-std 0.2 \
        --train-iters 1 --save "$T/ck_llamatied" --save-interval 1 >/dev/null 2>&1
    "$MC_BIN" "${BASE[@]}" --untie-embeddings-and-output-weights --no-bias-gelu-fusion \
        --num-layers 2 --init-method-std 0.2 --train-iters 1 --save "$T/ck_gpterf" \
        --save-interval 1 >/dev/null 2>&1
    for c in llamatied gpterf; do "$MC_BIN" export-hf --load "$T/ck_$c" --output "$T/hf_$c" >/dev/null 2>&1; done
    for c in gpt1 llama4 llama3 linear llamatied gpterf mxt qw3; do
        "$TOOLS/hf_logits" "$T/ck_$c" "$T/lg_$c.bin" 250 "${TOKENS[@]}" >/dev/null
        out=$("$TORCH_PY" "$CHECK" logits "$T/hf_$c" "$T/lg_$c.bin" "${TOKENS[@]}" 2>/dev/null | tail -1)
        rc=$?
        check "$c: transformers' logits equal megatron-c's to 1e-4 ($out)" bash -c "[ $rc = 0 ] && [[ '$out' == *'difference'* ]]"
    done
    # Megatron-LM's own MoE checkpoint (ep1, torch_dist: a tiny Mixtral) as MixtralForCausalLM
    MOE_REF=${MEGATRON_C_SHARED:-$ROOT/../shared}/data/megatron-ref/moe/ep1
    if [ -d "$MOE_REF" ]; then
        "$MC_BIN" export-hf --load "$MOE_REF" --output "$T/hf_moeref" >/dev/null 2>&1
        "$TOOLS/hf_logits" "$MOE_REF" "$T/lg_moeref.bin" 128 "${TOK100[@]}" >/dev/null 2>&1
        out=$("$TORCH_PY" "$CHECK" logits "$T/hf_moeref" "$T/lg_moeref.bin" "${TOK100[@]}" 2>/dev/null | tail -1)
        rc=$?
        check "Megatron-LM's ep1 MoE checkpoint exported: transformers' logits equal megatron-c's ($out)" bash -c "[ $rc = 0 ] && [[ '$out' == *'Mixtral'*'difference'* ]]"
    else
        skip "Megatron-LM's ep1 MoE checkpoint exported: transformers' logits" "no $MOE_REF"
    fi
    # models transformers wrote: imported at tp2, the same tensors exported, the same logits
    for k in gpt2 llama mixtral qwen3_moe; do
        "$TORCH_PY" "$CHECK" make $k "$T/tf_$k" >/dev/null 2>&1
        tp=$(case $k in gpt2|llama) echo 2;; *) echo 1;; esac) # MoE imports at tp 1 only
        "$MC_BIN" import-hf --hf-dir "$T/tf_$k" --save "$T/tfi_$k" --tensor-model-parallel-size $tp >/dev/null 2>&1
        "$MC_BIN" export-hf --load "$T/tfi_$k" --output "$T/tfo_$k" >/dev/null 2>&1
        out=$("$TORCH_PY" "$CHECK" same "$T/tf_$k" "$T/tfo_$k" 2>&1 | tail -1)
        check "$k saved by transformers -> import-hf tp$tp -> export-hf: $out" test "$out" = "the same tensors"
        "$TOOLS/hf_logits" "$T/tfi_$k" "$T/lg_$k.bin" 100 "${TOK100[@]}" >/dev/null
        out=$("$TORCH_PY" "$CHECK" logits "$T/tf_$k" "$T/lg_$k.bin" "${TOK100[@]}" 2>/dev/null | tail -1)
        rc=$?
        check "$k saved by transformers: megatron-c's logits of the import equal transformers' ($out)" bash -c "[ $rc = 0 ] && [[ '$out' == *'difference'* ]]"
    done
else
    skip "transformers' logits equal megatron-c's" "no torch/transformers at $TORCH_PY (set MC_TORCH2_PYTHON, or make build/venv-torch2)"
fi
