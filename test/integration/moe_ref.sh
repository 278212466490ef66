# Megatron's tiny MoE reference run (../shared/data/megatron-ref/moe, its HOW-MADE.md), sourced
# after lib.sh by the scripts that load its checkpoints: REF, and MOE_REF_FLAGS, the model and
# training flags Megatron ran it with (each script adds its load balancing, optimizer and format).
# moe_ref_or_skip WHAT: skips WHAT and exits when the reference is not there.
REF=${MEGATRON_C_SHARED:-$(dirname "${BASH_SOURCE[0]}")/../../../shared}/data/megatron-ref/moe
moe_ref_or_skip() {
    if [ ! -f "$REF/ep1.continuation.log" ]; then
        skip "$1" "$REF is not there"
        exit 0
    fi
}
MOE_REF_FLAGS=(--device cpu --num-layers 4 --hidden-size 32 --num-attention-heads 4 --group-query-attention
       --num-query-groups 2 --ffn-hidden-size 64 --seq-length 64 --max-position-embeddings 64
       --position-embedding-type rope --rotary-base 10000 --normalization RMSNorm --norm-epsilon 1e-5
       --swiglu --untie-embeddings-and-output-weights --disable-bias-linear --num-experts 4
       --moe-ffn-hidden-size 16 --moe-router-topk 2 --moe-token-dispatcher-type alltoall
       --tokenizer-type NullTokenizer --vocab-size 127 --make-vocab-size-divisible-by 64
       --data-path "$REF/tinyshakespeare_bytes_text_document" --split 98,2,0 --micro-batch-size 2
       --global-batch-size 8 --train-iters 15 --optimizer adam --lr 1e-3 --min-lr 1e-4
       --lr-decay-style cosine --lr-warmup-iters 3 --weight-decay 0.1 --adam-beta1 0.9
       --adam-beta2 0.95 --adam-eps 1e-8 --clip-grad 1.0 --init-method-std 0.02 --seed 1234
       --hidden-dropout 0 --attention-dropout 0 --log-interval 1 --eval-iters 0 --eval-interval 1000)
