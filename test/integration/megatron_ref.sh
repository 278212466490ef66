# Megatron-LM's own torch_dist checkpoints (../shared/data/megatron-ref/torch_dist, HOW-MADE.md;
# sourced): TORCH_DIST_REF, their folder, and RF, megatron-c's flags for the model and training
# they were made with (mock data; the scheduler taken from the checkpoint; 12 iterations).
TORCH_DIST_REF=${MEGATRON_C_SHARED:-$(dirname "${BASH_SOURCE[0]}")/../../../shared}/data/megatron-ref/torch_dist
RF=(--device cpu --mock-data --num-layers 2 --hidden-size 64 --num-attention-heads 4
    --ffn-hidden-size 256 --seq-length 32 --max-position-embeddings 32
    --position-embedding-type learned_absolute --tokenizer-type NullTokenizer --vocab-size 127
    --make-vocab-size-divisible-by 64 --init-method-std 0.02 --seed 1234 --hidden-dropout 0.0
    --attention-dropout 0.0 --transformer-impl local --micro-batch-size 2 --global-batch-size 4
    --optimizer adam --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 2
    --lr-decay-iters 10 --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95 --adam-eps 1e-8
    --clip-grad 1.0 --use-distributed-optimizer --log-interval 1 --eval-iters 0
    --use-checkpoint-opt-param-scheduler --train-iters 12)
