/* Fill-in-the-middle over the datasets (--fim-data): the tokenizer's ids of the FIM tokens, and
 * the numpy RandomStates Megatron's GPTFIMDatasets draw from.
 *
 * Each GPTFIMDataset owns one RandomState(--seed), advanced by every sample it reads. Megatron's
 * DataLoader with --num-workers N > 0 forks N workers, each with its own copy of every dataset
 * (so of its RandomState, all starting at the seed), and hands them microbatches round robin:
 * microbatch k of a split (counted from the start of the process: a resumed run starts the
 * states again, as Megatron does) is read by worker k mod N. So there is one state per split,
 * component (a GPTDataset of a blend) and worker; N = 0 reads in the main process, one state. */
#ifndef MC_DATA_FIM_STREAM_H
#define MC_DATA_FIM_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data/tokenizer.h"

/* The --fim-* arguments. */
typedef struct {
    bool on; /* --fim-data */
    double rate, spm_rate, fragment_rate;
    bool fragment_rate_set;
    const char *split_sample, *no_prefix;             /* NULL: None */
    const char *prefix, *middle, *suffix, *pad, *eod; /* --fim-*-token */
    int num_workers;                                  /* --num-workers */
    int64_t seed;                                     /* --seed */
} mc_fim_config_t;

typedef struct mc_fim_streams mc_fim_streams_t;

/* Looks the FIM tokens up in tok. NULL with one line in err naming the flag when a token is not
 * in the vocabulary or the tokenizer type is not supported yet. */
mc_fim_streams_t *mc_fim_streams_open(const mc_fim_config_t *c, const mc_tokenizer_t *tok,
                                      char *err, size_t n);
void mc_fim_streams_free(mc_fim_streams_t *s);

/* Transforms the text (len ids) of a sample of component comp (of ncomp) of a split, read for
 * the split's microbatch number `microbatch` of this process. 0, or -1 with err. */
int mc_fim_streams_apply(mc_fim_streams_t *s, int split, int comp, int ncomp, int64_t microbatch,
                         int32_t *text, int len, char *err, size_t n);

#endif
