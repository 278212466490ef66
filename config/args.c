/* Values derived from mc_args_t that layers below cli/ need (the pipeline, the trainer, the
 * data and the checkpoint converter). */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "config/args.h"

int mc_args_eval_microbatches(const mc_args_t *a)
{
    const int64_t mbs =
        a->eval_micro_batch_size > 0 ? a->eval_micro_batch_size : a->micro_batch_size;
    const int64_t dp = a->data_parallel_size > 0 ? a->data_parallel_size : 1;
    return (int)(a->eval_global_batch_size / (mbs * dp));
}

/* tokenizer.build_tokenizer + _vocab_size_with_padding. NullTokenizer's vocabulary is
 * vocab_size ids plus its eod; --mock-data with GPT2BPETokenizer uses vocab_size as is. */
int64_t mc_args_vocab_from_size(const mc_args_t *a)
{
    return strcmp(a->tokenizer_type, "NullTokenizer") == 0 ? (int64_t)a->vocab_size + 1
                                                           : a->vocab_size;
}
