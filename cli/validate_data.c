/* validate_args' data rules: one data source, the split's defaults, and --fim-data's rates and
 * combinations. Called by cli/validate.c's rule table. */
#include <stdbool.h>
#include <string.h>

#include "base/error.h"
#include "cli/validate_data.h"
#include "data/mock.h"

/* Megatron asserts --fim-rate and --fim-spm-rate non-zero (validate_args) and numpy's binomial
 * refuses a probability outside [0, 1]. */
static void fim_rate_check(const char *flag, double p, bool zero_ok)
{
    if (!(p >= 0 && p <= 1))
        mc_user_error("%s %g: not a probability (give a value in [0, 1])", flag, p);
    if (!zero_ok && p == 0)
        mc_user_error("%s 0: Megatron asserts a non-zero %s with --fim-data (\"%s should be "
                      "specified.\"; drop --fim-data for no FIM samples)",
                      flag, flag, flag);
}

static void fim(const mc_args_t *a)
{
    if (!a->fim_data) return;
    if (a->mock_data)
        mc_user_error("--fim-data with --mock-data: Megatron does not support the mock dataset "
                      "with FIM (give --data-path)");
    if (a->legacy_tokenizer)
        mc_user_error("--fim-data with --legacy-tokenizer: Megatron's FIM dataset calls "
                      "tokens_to_ids and ids_to_text, which its legacy tokenizers lack (drop "
                      "--legacy-tokenizer)");
    fim_rate_check("--fim-rate", a->fim_rate, false);
    fim_rate_check("--fim-spm-rate", a->fim_spm_rate, false);
    if (a->fim_fragment_rate_set) fim_rate_check("--fim-fragment-rate", a->fim_fragment_rate, true);
    if (a->fim_split_sample[0] && !a->fim_fragment_rate_set)
        mc_user_error("--fim-split-sample needs --fim-fragment-rate (Megatron draws each "
                      "fragment's FIM at that rate and fails without it)");
}

void mc_validate_data(mc_args_t *a)
{
    fim(a);
    const bool per_split = a->n_train_data_path + a->n_valid_data_path + a->n_test_data_path > 0;
    if (a->mock_data && (a->n_data_path > 0 || per_split))
        mc_user_error("--mock-data and --data-path are mutually exclusive (give one data source)");
    if (a->n_data_path > 0 && per_split)
        mc_user_error("--data-path and --train-data-path/--valid-data-path/--test-data-path are "
                      "mutually exclusive (give one of them)");
    if (a->mock_data && a->split[0])
        mc_warn("--split is ignored with --mock-data: Megatron's mock datasets always split "
                "\"%s\" (BlendedMegatronDatasetConfig)",
                MC_MOCK_SPLIT);
    if (a->n_data_path > 0 && !a->split[0]) {
        mc_warn("please specify --split when using --data-path; using the legacy default "
                "value of \"969, 30, 1\"");
        strcpy(a->split, "969, 30, 1");
    }
    if (!a->dataloader_type[0]) strcpy(a->dataloader_type, "single");
}
