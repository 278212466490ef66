/* The checkpoint directory's files (ckpt/files.h): Megatron's names, the tracker as
 * read_metadata parses it, and the atomic steps of a save (publishing a tree over an existing
 * one, replacing the tracker, removing leftovers of interrupted saves). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "ckpt/files.h"

static char g_dir[256];

static int make_dir(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof(g_dir), "/tmp/mc_ckpt_files_XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int remove_dir(void **state)
{
    (void)state;
    return mc_ckpt_rmtree(g_dir, NULL, 0);
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static void test_names(void **state)
{
    (void)state;
    char b[256];
    mc_ckpt_iter_dir(b, sizeof(b), "/ck", 100, false, NULL);
    assert_string_equal(b, "/ck/iter_0000100");
    mc_ckpt_iter_dir(b, sizeof(b), "/ck", 100, false, "1f");
    assert_string_equal(b, "/ck/iter_0000100.tmp-1f");
    mc_ckpt_iter_dir(b, sizeof(b), "/ck", 0, true, NULL);
    assert_string_equal(b, "/ck/release");
    mc_ckpt_rank_name(b, sizeof(b), 3, 1, 0, 1, 0);
    assert_string_equal(b, "mp_rank_03");
    mc_ckpt_rank_name(b, sizeof(b), 1, 4, 2, 1, 0);
    assert_string_equal(b, "mp_rank_01_002");
    /* expert parallelism adds the ep rank (Megatron's get_checkpoint_name) */
    mc_ckpt_rank_name(b, sizeof(b), 1, 1, 0, 4, 3);
    assert_string_equal(b, "mp_rank_01_003");
    mc_ckpt_rank_name(b, sizeof(b), 0, 2, 1, 2, 1);
    assert_string_equal(b, "mp_rank_00_001_001");
}

static void test_tracker(void **state)
{
    (void)state;
    char err[512], path[512];
    bool found, release;
    int64_t it;
    assert_int_equal(mc_ckpt_read_tracker(g_dir, &found, &it, &release, err, sizeof(err)), 0);
    assert_false(found);
    assert_int_equal(mc_ckpt_write_tracker(g_dir, "1200", "x", err, sizeof(err)), 0);
    assert_int_equal(mc_ckpt_read_tracker(g_dir, &found, &it, &release, err, sizeof(err)), 0);
    assert_true(found);
    assert_false(release);
    assert_int_equal(it, 1200);
    snprintf(path, sizeof(path), "%s/%s.tmp-x", g_dir, MC_CKPT_TRACKER);
    assert_false(exists(path)); /* renamed into place */
    /* Python's strip() and int(), or 'release' (iteration 0) */
    snprintf(path, sizeof(path), "%s/%s", g_dir, MC_CKPT_TRACKER);
    put(path, " 42\n");
    assert_int_equal(mc_ckpt_read_tracker(g_dir, &found, &it, &release, err, sizeof(err)), 0);
    assert_int_equal(it, 42);
    put(path, "release\n");
    assert_int_equal(mc_ckpt_read_tracker(g_dir, &found, &it, &release, err, sizeof(err)), 0);
    assert_true(release);
    assert_int_equal(it, 0);
    const char *bad[] = {"", "12abc", "-3", "latest"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        put(path, bad[i]);
        assert_int_equal(mc_ckpt_read_tracker(g_dir, &found, &it, &release, err, sizeof(err)), -1);
        assert_non_null(strstr(err, MC_CKPT_TRACKER));
        assert_non_null(strstr(err, "invalid metadata file"));
    }
    /* A directory in its place: one line naming it and saying so (fopen opens directories). */
    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_equal(mc_ckpt_read_tracker(g_dir, &found, &it, &release, err, sizeof(err)), -1);
    assert_non_null(strstr(err, MC_CKPT_TRACKER));
    assert_non_null(strstr(err, "is a directory"));
    assert_null(strchr(err, '\n'));
    assert_int_equal(rmdir(path), 0);
}

static void test_publish(void **state)
{
    (void)state;
    char err[512], staging[512], final[512], f[600];
    mc_ckpt_iter_dir(staging, sizeof(staging), g_dir, 7, false, "a");
    mc_ckpt_iter_dir(final, sizeof(final), g_dir, 7, false, NULL);
    snprintf(f, sizeof(f), "%s/mp_rank_00", staging);
    assert_int_equal(mc_mkdirs(f, err, sizeof(err)), 0);
    snprintf(f, sizeof(f), "%s/mp_rank_00/model_optim_rng.pt", staging);
    put(f, "old");
    assert_int_equal(mc_ckpt_publish_dir(staging, final, err, sizeof(err)), 0);
    assert_false(exists(staging));
    snprintf(f, sizeof(f), "%s/mp_rank_00/model_optim_rng.pt", final);
    assert_true(exists(f));
    /* the same iteration again: the new tree replaces the old one whole */
    mc_ckpt_iter_dir(staging, sizeof(staging), g_dir, 7, false, "b");
    snprintf(f, sizeof(f), "%s/mp_rank_01", staging);
    assert_int_equal(mc_mkdirs(f, err, sizeof(err)), 0);
    assert_int_equal(mc_ckpt_publish_dir(staging, final, err, sizeof(err)), 0);
    assert_false(exists(staging));
    snprintf(f, sizeof(f), "%s/mp_rank_01", final);
    assert_true(exists(f));
    snprintf(f, sizeof(f), "%s/mp_rank_00", final);
    assert_false(exists(f));
}

static void test_stale_and_list(void **state)
{
    (void)state;
    char err[512], p[600], held[256];
    snprintf(p, sizeof(p), "%s/iter_0000003.tmp-9/mp_rank_00", g_dir);
    assert_int_equal(mc_mkdirs(p, err, sizeof(err)), 0);
    snprintf(p, sizeof(p), "%s/iter_0000002/mp_rank_00", g_dir);
    assert_int_equal(mc_mkdirs(p, err, sizeof(err)), 0);
    snprintf(p, sizeof(p), "%s/%s.tmp-9", g_dir, MC_CKPT_TRACKER);
    put(p, "3");
    snprintf(p, sizeof(p), "%s/notes.tmp-1", g_dir); /* not ours: left alone */
    put(p, "x");
    assert_int_equal(mc_ckpt_remove_stale(g_dir), 2);
    assert_true(exists(p));
    mc_ckpt_list(g_dir, "iter_", held, sizeof(held));
    assert_string_equal(held, "iter_0000002");
    /* mkdirs refuses a path through a file */
    snprintf(p, sizeof(p), "%s/notes.tmp-1/sub", g_dir);
    assert_int_equal(mc_mkdirs(p, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "not a directory"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test_setup_teardown(test_tracker, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_publish, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_stale_and_list, make_dir, remove_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
