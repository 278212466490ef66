/* The strict backend (kernels/strict.c), the test double for a GPU's memory: its memory is
 * zero-filled and reachable only through the table's copies and ops; a direct host access dies
 * with SIGSEGV; an op given host memory stops with one line naming the op; the ops give the CPU
 * backend's results bit for bit; the comm layer's view (mc_strict_owns) knows its pointers,
 * interior and one-past-the-end ones included, and forgets them when freed. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/device.h"

static const mc_backend_t *S, *C;

static int setup(void **state)
{
    (void)state;
    S = mc_backend_strict();
    C = mc_backend_cpu();
    return 0;
}

/* Runs fn in a child with stderr captured into err (n bytes); returns the child's wait status. */
static int in_child(void (*fn)(void), char *err, size_t n)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        fn();
        _exit(0);
    }
    close(fds[1]);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < n && (r = read(fds[0], err + got, n - 1 - got)) > 0) got += (size_t)r;
    err[got] = '\0';
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return status;
}

static void test_memory(void **state)
{
    (void)state;
    float *d = S->alloc(S, 100 * sizeof(float)), h[100], back[100];
    assert_non_null(d);
    S->memcpy_d2h(S, back, d, sizeof(back));
    for (int i = 0; i < 100; i++) assert_true(back[i] == 0.0f);
    for (int i = 0; i < 100; i++) h[i] = (float)i - 7.5f;
    S->memcpy_h2d(S, d, h, sizeof(h));
    S->memcpy_d2d(S, d + 50, d, 50 * sizeof(float));
    S->memcpy_d2h(S, back, d, sizeof(back));
    assert_memory_equal(back, h, 50 * sizeof(float));
    assert_memory_equal(back + 50, h, 50 * sizeof(float));
    assert_true(mc_strict_owns(d) && mc_strict_owns(d + 37) && mc_strict_owns(d + 100));
    assert_false(mc_strict_owns(h));
    assert_false(mc_strict_owns(NULL));
    S->free(S, d);
    assert_false(mc_strict_owns(d));
}

static float *g_dev;
static void touch_device(void)
{
    signal(SIGSEGV, SIG_DFL); /* cmocka's handler would turn the crash into a test failure */
    fprintf(stderr, "%f\n", (double)*(volatile float *)g_dev);
}

static void test_host_access_crashes(void **state)
{
    (void)state;
    g_dev = S->alloc(S, 64);
    char err[512];
    int st = in_child(touch_device, err, sizeof(err));
    /* killed by SIGSEGV; under AddressSanitizer, its SEGV report and exit status 1 */
    assert_true((WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV) ||
                (WIFEXITED(st) && WEXITSTATUS(st) != 0 && strstr(err, "SEGV") != NULL));
    S->free(S, g_dev);
}

static void add_host(void)
{
    float a[4] = {1, 2, 3, 4};
    float *d = S->alloc(S, sizeof(a));
    S->add(S, MC_DT_F32, d, a, d, 4);
}

static void test_op_with_host_memory(void **state)
{
    (void)state;
    char err[512];
    int st = in_child(add_host, err, sizeof(err));
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) != 0);
    assert_non_null(strstr(err, "strict device: add was given host memory"));
    assert_null(strchr(err, '\n') == NULL ? NULL : strchr(strchr(err, '\n') + 1, '\n')); /* one line */
}

static void free_interior(void)
{
    char *d = S->alloc(S, 64);
    S->free(S, d + 8);
}

static void test_bad_free(void **state)
{
    (void)state;
    char err[512];
    int st = in_child(free_interior, err, sizeof(err));
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) != 0);
    assert_non_null(strstr(err, "which alloc did not return"));
}

/* The ops are the CPU's: LayerNorm and a bf16 multi-tensor Adam step, bit for bit. */
static void test_ops_are_the_cpus(void **state)
{
    (void)state;
    enum { N = 3, H = 40 };
    float x[N * H], w[H], b[H], out[2][N * H], mean[2][N], rstd[2][N];
    for (int i = 0; i < N * H; i++) x[i] = (float)((i * 37) % 101) / 17.0f - 2.0f;
    for (int i = 0; i < H; i++) w[i] = 1.0f + (float)i / 64.0f, b[i] = (float)i / 100.0f;
    C->layernorm_forward(C, MC_DT_F32, out[0], mean[0], rstd[0], x, w, b, N, H, 1e-5f);
    float *dx = S->alloc(S, sizeof(x)), *dw = S->alloc(S, sizeof(w)), *db = S->alloc(S, sizeof(b));
    float *dout = S->alloc(S, sizeof(x)), *dm = S->alloc(S, sizeof(mean[1])), *dr = S->alloc(S, sizeof(rstd[1]));
    S->memcpy_h2d(S, dx, x, sizeof(x)), S->memcpy_h2d(S, dw, w, sizeof(w)), S->memcpy_h2d(S, db, b, sizeof(b));
    S->layernorm_forward(S, MC_DT_F32, dout, dm, dr, dx, dw, db, N, H, 1e-5f);
    S->memcpy_d2h(S, out[1], dout, sizeof(x)), S->memcpy_d2h(S, mean[1], dm, sizeof(mean[1]));
    S->memcpy_d2h(S, rstd[1], dr, sizeof(rstd[1]));
    assert_memory_equal(out[0], out[1], sizeof(out[0]));
    assert_memory_equal(mean[0], mean[1], sizeof(mean[0]));
    assert_memory_equal(rstd[0], rstd[1], sizeof(rstd[0]));

    /* Adam over two tensors with a bf16 model copy: the list's pointers are translated */
    float p[2][8], g[8], m[2][8] = {{0}}, v[2][8] = {{0}};
    uint16_t model[2][8] = {{0}};
    for (int i = 0; i < 8; i++) p[0][i] = p[1][i] = (float)i / 8.0f - 0.4f, g[i] = (float)(i % 3) - 1.0f;
    mc_adam_tensor_t t[2] = {{.p = p[0], .g = g, .m = m[0], .v = v[0], .model = model[0], .n = 5, .wd = 0.1f},
                             {.p = p[0] + 5, .g = g + 5, .m = m[0] + 5, .v = v[0] + 5, .model = model[0] + 5, .n = 3}};
    C->adam_step(C, t, 2, MC_DT_BF16, 1e-2f, 0.9f, 0.95f, 1e-8f, 1);
    float *sp = S->alloc(S, sizeof(p[1])), *sg = S->alloc(S, sizeof(g)), *sm = S->alloc(S, sizeof(m[1])),
          *sv = S->alloc(S, sizeof(v[1]));
    uint16_t *smodel = S->alloc(S, sizeof(model[1]));
    S->memcpy_h2d(S, sp, p[1], sizeof(p[1])), S->memcpy_h2d(S, sg, g, sizeof(g));
    mc_adam_tensor_t u[2] = {{.p = sp, .g = sg, .m = sm, .v = sv, .model = smodel, .n = 5, .wd = 0.1f},
                             {.p = sp + 5, .g = sg + 5, .m = sm + 5, .v = sv + 5, .model = smodel + 5, .n = 3}};
    S->adam_step(S, u, 2, MC_DT_BF16, 1e-2f, 0.9f, 0.95f, 1e-8f, 1);
    S->memcpy_d2h(S, p[1], sp, sizeof(p[1])), S->memcpy_d2h(S, m[1], sm, sizeof(m[1]));
    S->memcpy_d2h(S, v[1], sv, sizeof(v[1])), S->memcpy_d2h(S, model[1], smodel, sizeof(model[1]));
    assert_memory_equal(p[0], p[1], sizeof(p[0]));
    assert_memory_equal(m[0], m[1], sizeof(m[0]));
    assert_memory_equal(v[0], v[1], sizeof(v[0]));
    assert_memory_equal(model[0], model[1], sizeof(model[0]));
    void *all[] = {dx, dw, db, dout, dm, dr, sp, sg, sm, sv, smodel};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) S->free(S, all[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_host_access_crashes),
        cmocka_unit_test(test_op_with_host_memory),
        cmocka_unit_test(test_bad_free),
        cmocka_unit_test(test_ops_are_the_cpus),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
