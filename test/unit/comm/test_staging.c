/* Staging plans (comm/staging.h), the copies between host and device buffers
 * (mc_comm_copy), messages naming a collective, and the duplicate finder of the start-up exchange
 * (ranks sharing a GPU). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "comm/exchange.h"
#include "comm/staging.h"

static int g_members[4] = {0, 1, 2, 3};
static mc_group_t g4 = {.rank = 2, .size = 4, .members = g_members, .name = "dp", .impl = (void *)1};

static void stage_all(mc_stage_region_t *r, int n)
{
    for (int i = 0; i < n; i++) r[i].staged = r[i].bytes > 0;
}

static void test_all_reduce_in_place(void **state)
{
    (void)state;
    float buf[10];
    mc_coll_t op = {.kind = MC_COLL_ALL_REDUCE, .group = &g4, .recv = buf, .count = 10, .dt = MC_DT_F32};
    mc_stage_region_t r[2];
    assert_int_equal(mc_coll_regions(&op, r), 2);
    assert_int_equal(r[0].bytes, 0);
    assert_ptr_equal(r[1].ptr, buf);
    assert_int_equal(r[1].bytes, 40);
    assert_true(r[1].in && r[1].out);
    stage_all(r, 2);
    assert_int_equal(mc_stage_plan(r, 2), 40);
    assert_int_equal(r[1].offset, 0);
    char block[64];
    mc_coll_t on;
    mc_stage_apply(&op, r, block, &on, NULL);
    assert_ptr_equal(on.recv, block);
    assert_null(on.send);
    assert_int_equal(on.count, 10);
    assert_int_equal(on.kind, MC_COLL_ALL_REDUCE);
    /* send == recv is in place too, and stays so on the stage */
    op.send = buf;
    assert_int_equal(mc_coll_regions(&op, r), 2);
    assert_int_equal(r[0].bytes, 0);
    stage_all(r, 2);
    mc_stage_plan(r, 2);
    mc_stage_apply(&op, r, block, &on, NULL);
    assert_ptr_equal(on.send, block);
    assert_ptr_equal(on.recv, block);
}

static void test_all_reduce_out_of_place(void **state)
{
    (void)state;
    double send[5], recv[5];
    mc_coll_t op = {.kind = MC_COLL_ALL_REDUCE, .group = &g4, .send = send, .recv = recv, .count = 5,
                    .dt = MC_DT_F64};
    mc_stage_region_t r[2];
    mc_coll_regions(&op, r);
    assert_true(r[0].in && !r[0].out);
    assert_true(!r[1].in && r[1].out);
    stage_all(r, 2);
    size_t total = mc_stage_plan(r, 2);
    /* two separate buffers: two aligned blocks, in address order */
    size_t first = (uintptr_t)send < (uintptr_t)recv ? r[0].offset : r[1].offset;
    size_t second = (uintptr_t)send < (uintptr_t)recv ? r[1].offset : r[0].offset;
    assert_int_equal(first, 0);
    assert_int_equal(second, MC_STAGE_ALIGN);
    assert_int_equal(total, MC_STAGE_ALIGN + 40);
}

/* Reduce-scatter in place: the shard (recv) lies inside send and keeps its place on the stage. */
static void test_reduce_scatter_in_place(void **state)
{
    (void)state;
    float send[4 * 6];
    mc_coll_t op = {.kind = MC_COLL_REDUCE_SCATTER, .group = &g4, .send = send, .recv = send + 2 * 6,
                    .count = 6, .dt = MC_DT_F32};
    mc_stage_region_t r[2];
    mc_coll_regions(&op, r);
    assert_int_equal(r[0].bytes, 4 * 6 * 4);
    assert_int_equal(r[1].bytes, 6 * 4);
    stage_all(r, 2);
    assert_int_equal(mc_stage_plan(r, 2), 4 * 6 * 4);
    assert_int_equal(r[0].offset, 0);
    assert_int_equal(r[1].offset, 2 * 6 * 4);
    char block[128];
    mc_coll_t on;
    mc_stage_apply(&op, r, block, &on, NULL);
    assert_ptr_equal(on.send, block);
    assert_ptr_equal(on.recv, block + 48);
}

/* All-gather in place: send is this rank's block of recv. */
static void test_all_gather_in_place(void **state)
{
    (void)state;
    int64_t recv[4 * 3];
    mc_coll_t op = {.kind = MC_COLL_ALL_GATHER, .group = &g4, .send = recv + 2 * 3, .recv = recv, .count = 3,
                    .dt = MC_DT_I64};
    mc_stage_region_t r[2];
    mc_coll_regions(&op, r);
    assert_int_equal(r[0].bytes, 24);
    assert_int_equal(r[1].bytes, 96);
    assert_true(r[0].in && r[1].out);
    stage_all(r, 2);
    assert_int_equal(mc_stage_plan(r, 2), 96);
    assert_int_equal(r[1].offset, 0);
    assert_int_equal(r[0].offset, 48);
}

/* Only the staged regions get a place; the others keep their pointers. */
static void test_partly_staged(void **state)
{
    (void)state;
    float send[3], recv[3];
    mc_coll_t op = {.kind = MC_COLL_ALL_REDUCE, .group = &g4, .send = send, .recv = recv, .count = 3,
                    .dt = MC_DT_F32};
    mc_stage_region_t r[2];
    mc_coll_regions(&op, r);
    r[0].staged = false, r[1].staged = true;
    assert_int_equal(mc_stage_plan(r, 2), 12);
    char block[16];
    mc_coll_t on;
    mc_stage_apply(&op, r, block, &on, NULL);
    assert_ptr_equal(on.send, send);
    assert_ptr_equal(on.recv, block);
}

static void test_broadcast_barrier_empty(void **state)
{
    (void)state;
    uint8_t buf[7];
    mc_coll_t op = {.kind = MC_COLL_BROADCAST, .group = &g4, .recv = buf, .count = 7, .dt = MC_DT_U8, .root = 3};
    mc_stage_region_t r[2];
    mc_coll_regions(&op, r);
    assert_true(r[1].in && r[1].out);
    assert_int_equal(r[1].bytes, 7);
    stage_all(r, 2);
    assert_int_equal(mc_stage_plan(r, 2), 7);
    mc_coll_t bar = {.kind = MC_COLL_BARRIER, .group = &g4};
    assert_int_equal(mc_coll_regions(&bar, r), 2);
    assert_int_equal(r[0].bytes + r[1].bytes, 0);
    stage_all(r, 2);
    assert_int_equal(mc_stage_plan(r, 2), 0);
    mc_coll_t none = {.kind = MC_COLL_ALL_REDUCE, .group = &g4, .recv = NULL, .count = 0, .dt = MC_DT_F32};
    mc_coll_regions(&none, r);
    stage_all(r, 2);
    assert_int_equal(mc_stage_plan(r, 2), 0);
}

/* A p2p batch: one region per operation, sends in and receives out; zero-element operations
 * take no room; every staged buffer starts aligned. */
static void test_p2p(void **state)
{
    (void)state;
    float a[100], b[50];
    uint16_t c[3];
    mc_p2p_t ops[4] = {{1, 1, a, 100, MC_DT_F32}, {0, 3, b, 50, MC_DT_F32}, {0, 1, NULL, 0, MC_DT_F32},
                       {1, 3, c, 3, MC_DT_BF16}};
    mc_coll_t op = {.kind = MC_COLL_P2P_BATCH, .group = &g4, .p2p = ops, .n_p2p = 4};
    mc_stage_region_t r[4];
    assert_int_equal(mc_coll_regions(&op, r), 4);
    assert_true(r[0].in && !r[0].out);
    assert_true(!r[1].in && r[1].out);
    assert_int_equal(r[2].bytes, 0);
    assert_int_equal(r[3].bytes, 6);
    stage_all(r, 4);
    size_t total = mc_stage_plan(r, 4);
    int staged[3] = {0, 1, 3};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(r[staged[i]].offset % MC_STAGE_ALIGN, 0);
        assert_true(r[staged[i]].offset + r[staged[i]].bytes <= total);
        for (int j = 0; j < i; j++) { /* disjoint */
            const mc_stage_region_t *x = &r[staged[i]], *y = &r[staged[j]];
            assert_true(x->offset + x->bytes <= y->offset || y->offset + y->bytes <= x->offset);
        }
    }
    assert_true(total <= 512 + 256 + 256 && total >= 400 + 200 + 6); /* aligned sizes, the last one not */
    char *block = malloc(total);
    mc_p2p_t staged_ops[4];
    mc_coll_t on;
    mc_stage_apply(&op, r, block, &on, staged_ops);
    assert_ptr_equal(on.p2p, staged_ops);
    assert_int_equal(on.n_p2p, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(on.p2p[i].is_send, ops[i].is_send);
        assert_int_equal(on.p2p[i].peer, ops[i].peer);
        assert_int_equal(on.p2p[i].count, ops[i].count);
        assert_int_equal(on.p2p[i].dt, ops[i].dt);
    }
    assert_ptr_equal(on.p2p[0].buf, block + r[0].offset);
    assert_ptr_equal(on.p2p[3].buf, block + r[3].offset);
    assert_null(on.p2p[2].buf);
    free(block);
}

/* Overlapping regions of a p2p batch in one cluster; a region touching the next cluster's start
 * does not join it. */
static void test_clusters(void **state)
{
    (void)state;
    char base[4096];
    mc_stage_region_t r[4] = {
        {.ptr = base + 100, .bytes = 50, .staged = true},  /* [100, 150) */
        {.ptr = base + 120, .bytes = 100, .staged = true}, /* [120, 220): joins the first */
        {.ptr = base + 220, .bytes = 10, .staged = true},  /* [220, 230): adjacent, a new cluster */
        {.ptr = base + 10, .bytes = 5, .staged = true},    /* [10, 15): first by address */
    };
    size_t total = mc_stage_plan(r, 4);
    assert_int_equal(r[3].offset, 0);
    assert_int_equal(r[0].offset, MC_STAGE_ALIGN);
    assert_int_equal(r[1].offset, MC_STAGE_ALIGN + 20);
    assert_int_equal(r[2].offset, 2 * MC_STAGE_ALIGN);
    assert_int_equal(total, 2 * MC_STAGE_ALIGN + 10);
}

/* ---- mc_comm_copy with a fake device: "device" pointers are the upper half of an array ---- */

static char g_mem[256];
static int g_d2h, g_h2d, g_d2d;
static int fake_is_device(void *ctx, const void *p)
{
    (void)ctx;
    return (const char *)p >= g_mem + 128 && (const char *)p < g_mem + 256;
}
static void fake_d2h(void *ctx, void *dst, const void *src, size_t n) { (void)ctx, g_d2h++, memcpy(dst, src, n); }
static void fake_h2d(void *ctx, void *dst, const void *src, size_t n) { (void)ctx, g_h2d++, memcpy(dst, src, n); }
static void fake_d2d(void *ctx, void *dst, const void *src, size_t n) { (void)ctx, g_d2d++, memmove(dst, src, n); }

static void test_comm_copy(void **state)
{
    (void)state;
    mc_devmem_t dm = {.is_device = fake_is_device, .d2h = fake_d2h, .h2d = fake_h2d, .d2d = fake_d2d};
    for (int i = 0; i < 256; i++) g_mem[i] = (char)i;
    mc_comm_copy(&dm, g_mem + 130, g_mem + 10, 4); /* h2d */
    mc_comm_copy(&dm, g_mem + 20, g_mem + 200, 4); /* d2h */
    mc_comm_copy(&dm, g_mem + 140, g_mem + 210, 4); /* d2d */
    mc_comm_copy(&dm, g_mem + 30, g_mem + 40, 4);  /* host: memmove */
    mc_comm_copy(&dm, g_mem + 150, g_mem + 150, 4); /* the same buffer: nothing */
    mc_comm_copy(&dm, g_mem + 160, g_mem + 170, 0); /* nothing */
    assert_int_equal(g_h2d, 1);
    assert_int_equal(g_d2h, 1);
    assert_int_equal(g_d2d, 1);
    assert_int_equal(g_mem[130], 10);
    assert_int_equal(g_mem[20], (char)200);
    assert_int_equal(g_mem[140], (char)210);
    assert_int_equal(g_mem[30], 40);
    /* without devmem every buffer is host memory; overlapping copies are memmoves */
    for (int i = 0; i < 16; i++) g_mem[i] = (char)i;
    mc_comm_copy(NULL, g_mem + 2, g_mem, 8);
    for (int i = 0; i < 8; i++) assert_int_equal(g_mem[2 + i], i);
}

static void test_coll_what(void **state)
{
    (void)state;
    char buf[96];
    mc_coll_t ar = {.kind = MC_COLL_ALL_REDUCE, .group = &g4};
    assert_string_equal(mc_coll_what(&ar, buf, sizeof(buf)), "all-reduce");
    static int members[4] = {4, 5, 6, 7};
    mc_group_t g = {.rank = 0, .size = 4, .members = members, .name = "pp"};
    mc_p2p_t ops[3] = {{1, 1, NULL, 0, MC_DT_F32}, {0, 1, NULL, 0, MC_DT_F32}, {0, 3, NULL, 0, MC_DT_F32}};
    mc_coll_t p = {.kind = MC_COLL_P2P_BATCH, .group = &g, .p2p = ops, .n_p2p = 2};
    assert_string_equal(mc_coll_what(&p, buf, sizeof(buf)), "p2p with rank 5");
    p.n_p2p = 3;
    assert_string_equal(mc_coll_what(&p, buf, sizeof(buf)), "p2p with ranks 5, 7");
    assert_int_equal(mc_p2p_peer(&p, 0), 5);
    assert_int_equal(mc_p2p_peer(&p, 1), 7);
    assert_int_equal(mc_p2p_peer(&p, 2), -1);
}

static void test_first_duplicate(void **state)
{
    (void)state;
    char ids[5][16] = {"h0/0000:01", "h0/0000:02", "h1/0000:01", "h0/0000:03", "h1/0000:01"};
    int a, b;
    mc_exchange_first_duplicate(ids, 5, 16, &a, &b);
    assert_int_equal(a, 2);
    assert_int_equal(b, 4);
    mc_exchange_first_duplicate(ids, 4, 16, &a, &b);
    assert_int_equal(a, -1);
    assert_int_equal(b, -1);
    mc_exchange_first_duplicate(ids, 1, 16, &a, &b);
    assert_int_equal(a, -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_reduce_in_place),
        cmocka_unit_test(test_all_reduce_out_of_place),
        cmocka_unit_test(test_reduce_scatter_in_place),
        cmocka_unit_test(test_all_gather_in_place),
        cmocka_unit_test(test_partly_staged),
        cmocka_unit_test(test_broadcast_barrier_empty),
        cmocka_unit_test(test_p2p),
        cmocka_unit_test(test_clusters),
        cmocka_unit_test(test_comm_copy),
        cmocka_unit_test(test_coll_what),
        cmocka_unit_test(test_first_duplicate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
