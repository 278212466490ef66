/* Asynchronous saves (ckpt/async.h) and the exit signal (train/signals.h): the snapshot
 * detaches a checkpoint's tensors from training memory, the writer runs on its own thread and is
 * handed back only when done, and a caught signal is seen by the all-ranks question. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/flags.h"
#include "ckpt/async.h"
#include "train/signals.h"

/* {"model": {"w": wrap(live, 8), "b": wrap(live + 8, 3)}, "copy": owned [4], "again": the w
 * tensor once more} */
static mc_pyobj_t *sample(float *live)
{
    mc_pyobj_t *root = mc_py_dict(), *model = mc_py_ordered_dict();
    const int64_t s8[] = {8}, s3[] = {3}, s4[] = {4};
    mc_pyobj_t *w = mc_py_tensor_wrap(MC_TORCH_FLOAT32, 1, s8, live);
    assert_int_equal(mc_py_dict_set_str(model, "w", w), 0);
    assert_int_equal(mc_py_dict_set_str(model, "b", mc_py_tensor_wrap(MC_TORCH_FLOAT32, 1, s3, live + 8)), 0);
    assert_int_equal(mc_py_dict_set_str(root, "model", model), 0);
    assert_int_equal(mc_py_dict_set_str(root, "copy", mc_py_tensor_new(MC_TORCH_FLOAT32, 1, s4)), 0);
    assert_int_equal(mc_py_dict_set_str(root, "again", mc_py_incref(w)), 0);
    return root;
}

static void test_borrowed_bytes(void **state)
{
    (void)state;
    float live[11] = {0};
    mc_pyobj_t *root = sample(live);
    /* w (twice: the count may exceed what a snapshot copies, never fall short), b; each
     * rounded up to 64 bytes; the owned tensor is not counted */
    assert_int_equal(mc_ckpt_borrowed_bytes(root), 3 * 64);
    mc_py_decref(root);
}

static void test_snapshot_detaches(void **state)
{
    (void)state;
    float live[11];
    for (int i = 0; i < 11; i++) live[i] = (float)i;
    mc_pyobj_t *root = sample(live);
    mc_ckpt_async_t *a = mc_ckpt_async_new(mc_ckpt_borrowed_bytes(root));
    assert_non_null(a);
    char err[256] = "";
    assert_int_equal(mc_ckpt_async_snapshot(a, &root, 1, err, sizeof(err)), 0);
    for (int i = 0; i < 11; i++) live[i] = -1.0f; /* training goes on */
    const mc_pyobj_t *w = mc_py_dict_get_str(mc_py_dict_get_str(root, "model"), "w");
    const mc_pyobj_t *b = mc_py_dict_get_str(mc_py_dict_get_str(root, "model"), "b");
    const float *wd = mc_py_tensor_data(w), *bd = mc_py_tensor_data(b);
    for (int i = 0; i < 8; i++) assert_true(wd[i] == (float)i);
    for (int i = 0; i < 3; i++) assert_true(bd[i] == (float)(8 + i));
    assert_ptr_equal(mc_py_tensor_data(mc_py_dict_get_str(root, "again")), wd); /* copied once */
    mc_py_decref(root); /* the snapshot buffer is not the graph's to free */
    mc_ckpt_async_free(a);
}

static void test_snapshot_too_small(void **state)
{
    (void)state;
    float live[11] = {0};
    mc_pyobj_t *root = sample(live);
    mc_ckpt_async_t *a = mc_ckpt_async_new(64);
    char err[256] = "";
    assert_int_equal(mc_ckpt_async_snapshot(a, &root, 1, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "snapshot of"));
    mc_py_decref(root);
    mc_ckpt_async_free(a);
}

typedef struct {
    atomic_int go;     /* the test lets the writer finish */
    atomic_int wrote;
} job_t;

static void slow_write(void *p)
{
    job_t *j = p;
    while (!atomic_load(&j->go)) nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    atomic_store(&j->wrote, 1);
}

static void test_writer_thread(void **state)
{
    (void)state;
    mc_comm_t *comm = mc_comm_single();
    mc_ckpt_async_t *a = mc_ckpt_async_new(0);
    job_t job;
    atomic_init(&job.go, 0);
    atomic_init(&job.wrote, 0);
    char err[256] = "";
    assert_false(mc_ckpt_async_pending(a));
    assert_null(mc_ckpt_async_finish(a, comm, false)); /* nothing in flight */
    assert_int_equal(mc_ckpt_async_start(a, slow_write, &job, err, sizeof(err)), 0);
    assert_true(mc_ckpt_async_pending(a));
    /* one in flight at a time */
    assert_int_equal(mc_ckpt_async_start(a, slow_write, &job, err, sizeof(err)), -1);
    /* the caller goes on while the writer works: not handed back before it is done */
    for (int i = 0; i < 20; i++) assert_null(mc_ckpt_async_finish(a, comm, false));
    assert_int_equal(atomic_load(&job.wrote), 0);
    atomic_store(&job.go, 1);
    void *back = NULL;
    while (!(back = mc_ckpt_async_finish(a, comm, false))) nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    assert_ptr_equal(back, &job);
    assert_int_equal(atomic_load(&job.wrote), 1);
    assert_false(mc_ckpt_async_pending(a));
    /* blocking: waits for the writer */
    atomic_store(&job.go, 0);
    atomic_store(&job.wrote, 0);
    assert_int_equal(mc_ckpt_async_start(a, slow_write, &job, err, sizeof(err)), 0);
    atomic_store(&job.go, 1);
    assert_ptr_equal(mc_ckpt_async_finish(a, comm, true), &job);
    assert_int_equal(atomic_load(&job.wrote), 1);
    mc_ckpt_async_free(a);
    comm->finalize(comm);
}

static void test_signal_names(void **state)
{
    (void)state;
    const mc_flag_t *f = mc_flag_find("--exit-signal");
    assert_non_null(f);
    int n = 0;
    for (const char *const *c = f->choices; *c; c++, n++) assert_true(mc_signal_number(*c) > 0);
    assert_true(n >= 2);
    assert_int_equal(mc_signal_number("SIGTERM"), SIGTERM);
    assert_int_equal(mc_signal_number("SIGUSR1"), SIGUSR1);
    assert_int_equal(mc_signal_number("SIGKILL"), -1); /* cannot be caught */
    assert_int_equal(mc_signal_number("TERM"), -1);
}

static void test_signal_noted(void **state)
{
    (void)state;
    mc_comm_t *comm = mc_comm_single();
    mc_signals_init(SIGUSR2);
    assert_false(mc_signals_received(comm));
    raise(SIGUSR2); /* handled: the process lives on */
    assert_true(mc_signals_received(comm));
    comm->finalize(comm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_borrowed_bytes),
        cmocka_unit_test(test_snapshot_detaches),
        cmocka_unit_test(test_snapshot_too_small),
        cmocka_unit_test(test_writer_thread),
        cmocka_unit_test(test_signal_names),
        cmocka_unit_test(test_signal_noted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
