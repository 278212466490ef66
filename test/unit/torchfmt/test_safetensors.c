/* torchfmt/safetensors.h: a write / read round trip of F32, BF16 and F16 tensors (offsets,
 * the header padded to 8 bytes, __metadata__), then damaged files: truncated, a header length
 * beyond the file, overlapping and out-of-range offsets, a size that disagrees with the shape,
 * a header that is not JSON. Each must be one line naming the file, never a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "torchfmt/safetensors.h"

static char g_path[256];

static int setup(void **state)
{
    snprintf(g_path, sizeof g_path, "/tmp/mc_test_st_%d.safetensors", (int)getpid());
    return 0;
}

static int teardown(void **state)
{
    unlink(g_path);
    return 0;
}

static const float F[6] = {1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, 7.0f};
static const uint16_t B[4] = {0x3f80, 0xc020, 0x0000, 0x7f80};
static const uint16_t H[3] = {0x3c00, 0xc000, 0x0001};

static void write_sample(void)
{
    mc_st_entry_t e[3] = {
        {"a.weight", MC_TORCH_FLOAT32, 2, {2, 3}, F},
        {"b", MC_TORCH_BFLOAT16, 1, {4}, B},
        {"c.half", MC_TORCH_FLOAT16, 1, {3}, H},
    };
    const char *meta[] = {"format", "pt"};
    char err[512];
    assert_int_equal(mc_st_write(g_path, e, 3, meta, 1, err, sizeof err), 0);
    FILE *f = fopen(g_path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    assert_int_equal((uint64_t)size, mc_st_file_size(e, 3, meta, 1));
}

static void test_roundtrip(void **state)
{
    write_sample();
    mc_st_file_t f;
    char err[512];
    assert_int_equal(mc_st_open(g_path, &f, err, sizeof err), 0);
    assert_int_equal(f.n, 3);
    /* the data section starts 8-byte aligned: header length a multiple of 8 */
    assert_int_equal((f.data - (const uint8_t *)f.map) % 8, 0);
    assert_string_equal(mc_st_meta(&f, "format"), "pt");
    const mc_st_tensor_t *a = mc_st_find(&f, "a.weight"), *b = mc_st_find(&f, "b"),
                         *c = mc_st_find(&f, "c.half");
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    assert_int_equal(a->dtype, MC_TORCH_FLOAT32);
    assert_int_equal(a->ndim, 2);
    assert_int_equal(a->shape[1], 3);
    assert_int_equal(a->begin, 0);
    assert_int_equal(a->end, 24);
    assert_int_equal(b->begin, 24);
    assert_int_equal(b->end, 32);
    assert_int_equal(c->begin, 32);
    assert_int_equal(c->end, 38);
    assert_int_equal(b->dtype, MC_TORCH_BFLOAT16);
    assert_int_equal(c->dtype, MC_TORCH_FLOAT16);
    assert_memory_equal(mc_st_bytes(&f, a), F, sizeof F);
    assert_memory_equal(mc_st_bytes(&f, b), B, sizeof B);
    assert_memory_equal(mc_st_bytes(&f, c), H, sizeof H);
    assert_null(mc_st_find(&f, "missing"));
    mc_st_close(&f);
}

static void write_raw(const char *header, const void *data, size_t data_len, uint64_t hlen)
{
    FILE *f = fopen(g_path, "wb");
    assert_non_null(f);
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)(hlen >> (8 * i));
    fwrite(len, 1, 8, f);
    fwrite(header, 1, strlen(header), f);
    if (data_len) fwrite(data, 1, data_len, f);
    fclose(f);
}

/* Opening the file fails with one line naming it and containing want. */
static void expect_refused(const char *want)
{
    mc_st_file_t f;
    char err[512] = "";
    assert_int_equal(mc_st_open(g_path, &f, err, sizeof err), -1);
    if (!strstr(err, want) || !strstr(err, g_path) || strchr(err, '\n'))
        fail_msg("got '%s', wanted '%s'", err, want);
}

static void test_damaged(void **state)
{
    static const uint8_t data[16] = {0};
    const char *ok = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    write_raw(ok, data, 8, strlen(ok));
    mc_st_file_t f;
    char err[512];
    assert_int_equal(mc_st_open(g_path, &f, err, sizeof err), 0);
    mc_st_close(&f);

    write_raw("", NULL, 0, 0); /* the 8 length bytes are there, nothing else */
    expect_refused("not a JSON object");
    FILE *t = fopen(g_path, "wb");
    fwrite("abc", 1, 3, t);
    fclose(t);
    expect_refused("too short");
    write_raw(ok, data, 8, 1000);
    expect_refused("beyond the file");
    write_raw(ok, data, 4, strlen(ok)); /* the data truncated */
    expect_refused("beyond the data");
    const char *overlap = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                          "\"y\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}";
    write_raw(overlap, data, 16, strlen(overlap));
    expect_refused("overlap");
    const char *size = "{\"x\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    write_raw(size, data, 8, strlen(size));
    expect_refused("its shape and dtype");
    const char *back = "{\"x\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}";
    write_raw(back, data, 8, strlen(back));
    expect_refused("bad data_offsets");
    const char *dtype = "{\"x\":{\"dtype\":\"Q7\",\"shape\":[1],\"data_offsets\":[0,1]}}";
    write_raw(dtype, data, 8, strlen(dtype));
    expect_refused("unknown dtype");
    write_raw("{\"x\": [1, 2", data, 8, strlen("{\"x\": [1, 2"));
    expect_refused("not a JSON object");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
