/* --log-progress's arithmetic (train/progress.c), as Megatron's
 * compute_throughputs_and_append_to_progress_log: the job's throughput from the process start and
 * the operations of the loaded checkpoint, the cumulative one from the first "Starting job" of
 * this world size and the operations saved before it, and the tokens so far, on a model large
 * enough that every field shows digits. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "config/flags.h"
#include "comm/comm.h"
#include "model/flops.h"
#include "train/progress.h"

static void stamp(char *buf, size_t n, time_t t)
{
    strftime(buf, n, "%Y-%m-%d %H:%M:%S", localtime(&t));
}

static void test_saved_line_numbers(void **state)
{
    (void)state;
    static mc_args_t a;
    mc_args_defaults(&a);
    a.num_layers = 4, a.hidden_size = 1024, a.num_attention_heads = 8, a.kv_channels = 128;
    a.ffn_hidden_size = 4096, a.seq_length = 2048, a.padded_vocab_size = 51200;
    a.global_batch_size = 256, a.world_size = 8;
    char dir[] = "/tmp/mc_progress_XXXXXX";
    assert_non_null(mkdtemp(dir));
    snprintf(a.save, sizeof(a.save), "%s", dir);
    mc_trainer_t t;
    memset(&t, 0, sizeof(t));
    t.args = &a;
    t.comm = mc_comm_single();
    t.iteration = 100;
    t.consumed_train_samples = 1000000;
    mc_gpt_config_from_args(&t.model.cfg, &a);
    const double F = mc_gpt_flops(&t.model.cfg, a.global_batch_size);

    /* a 4-rank job's save of 40 F, then this world size's first start 2000 s ago */
    char path[256], s1[32], s2[32];
    snprintf(path, sizeof(path), "%s/progress.txt", dir);
    const time_t now = time(NULL);
    stamp(s1, sizeof(s1), now - 3000), stamp(s2, sizeof(s2), now - 2000);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s\tJob ID: 1\t# GPUs: 4\tStarting job\n", s1);
    fprintf(f, "%s\tJob ID: 1\t# GPUs: 4\tSaved checkpoint\tIteration: 40\tJob throughput: 1.0 "
               "TFLOP/s/GPU\tCumulative throughput: 1.0 TFLOP/s/GPU\tFloating-point operations: "
               "%.2e\tTokens (in billions): 0.00\n", s1, 40 * F);
    fprintf(f, "%s\tJob ID: 2\t# GPUs: 8\tStarting job\n", s2);
    fclose(f);

    /* this process started 500 s ago after loading a checkpoint of 50 F */
    mc_progress_saved(&t, mc_wall_s() - 500, 50 * F);
    f = fopen(path, "r");
    assert_non_null(f);
    char line[1024], last[1024] = "";
    while (fgets(line, sizeof(line), f)) snprintf(last, sizeof(last), "%s", line);
    fclose(f);
    int it;
    double job, cum, ops, tokens;
    const char *p = strstr(last, "# GPUs: 8\tSaved checkpoint\t");
    assert_non_null(p);
    assert_int_equal(sscanf(p, "# GPUs: 8\tSaved checkpoint\tIteration: %d\tJob throughput: %lf "
                               "TFLOP/s/GPU\tCumulative throughput: %lf TFLOP/s/GPU\t"
                               "Floating-point operations: %lf\tTokens (in billions): %lf",
                            &it, &job, &cum, &ops, &tokens),
                     5);
    assert_int_equal(it, 100);
    /* (100 F - 50 F) / (500 s * 1e12 * 8 GPUs); (100 F - 40 F) / (2000 s * 1e12 * 8) */
    assert_true(job > 1 && fabs(job - 50 * F / (500 * 8e12)) <= 0.051 + 1e-3 * job);
    assert_true(cum > 1 && fabs(cum - 60 * F / (2000 * 8e12)) <= 0.051 + 1e-3 * cum);
    assert_true(fabs(ops - 100 * F) <= 0.005 * 100 * F);
    assert_true(fabs(tokens - 2.048) <= 0.0051); /* 1e6 samples x 2048 tokens */
    remove(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_saved_line_numbers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
