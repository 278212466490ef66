/* TensorBoard event files (base/tfevents.c): CRC-32C against RFC 3720's vectors (B.4) and the
 * check value of "123456789", TFRecord framing and the Event encoding against the bytes
 * TensorBoard's own RecordWriter and protobuf classes produce (tensorboard 2.21), and the
 * writer's file: its name, its first event, the queue's flushes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/tfevents.h"

static void test_crc32c_vectors(void **state)
{
    (void)state;
    uint8_t buf[32];
    memset(buf, 0, 32);
    assert_int_equal(mc_crc32c(0, buf, 32), 0x8A9136AAu);
    memset(buf, 0xff, 32);
    assert_int_equal(mc_crc32c(0, buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++) buf[i] = (uint8_t)i;
    assert_int_equal(mc_crc32c(0, buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++) buf[i] = (uint8_t)(31 - i);
    assert_int_equal(mc_crc32c(0, buf, 32), 0x113FDB5Cu);
    assert_int_equal(mc_crc32c(0, "123456789", 9), 0xE3069283u);
    /* continued in pieces: the same value */
    assert_int_equal(mc_crc32c(mc_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
    assert_int_equal(mc_crc32c(0, "", 0), 0u);
}

static void test_mask(void **state)
{
    (void)state;
    /* ((c >> 15) | (c << 17)) + 0xa282ead8, for the check value (Python) */
    assert_int_equal(mc_crc32c_masked(0xE3069283u), 0xC78AB0E5u);
    assert_int_equal(mc_crc32c_masked(0), 0xa282ead8u);
}

/* RecordWriter(f).write(b"hello") */
static void test_record_framing(void **state)
{
    (void)state;
    static const uint8_t want[] = {0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xea, 0xb2, 0x04,
                                   0x3e, 'h',  'e',  'l',  'l',  'o',  0xbb, 0x1f, 0x1c, 0x19};
    uint8_t out[sizeof(want)];
    mc_tfrecord_frame("hello", 5, out);
    assert_memory_equal(out, want, sizeof(want));
}

/* Event(wall_time=1.5, step=7, summary=Summary(value=[Value(tag="lm loss", simple_value=2.5)]))
 * .SerializeToString() */
static void test_scalar_event(void **state)
{
    (void)state;
    static const uint8_t want[] = {0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf8, 0x3f, 0x10,
                                   0x07, 0x2a, 0x10, 0x0a, 0x0e, 0x0a, 0x07, 'l',  'm',  ' ',
                                   'l',  'o',  's',  's',  0x15, 0x00, 0x00, 0x20, 0x40};
    uint8_t out[128];
    size_t n = mc_tfevent_scalar(out, sizeof(out), 1.5, 7, "lm loss", 2.5f);
    assert_int_equal(n, sizeof(want));
    assert_memory_equal(out, want, sizeof(want));
    /* step 0 is left out, as proto3 does */
    n = mc_tfevent_scalar(out, sizeof(out), 1.5, 0, "lm loss", 2.5f);
    assert_int_equal(n, sizeof(want) - 2);
    assert_int_equal(out[9], 0x2a);
    /* too small a buffer */
    assert_int_equal(mc_tfevent_scalar(out, 20, 1.5, 7, "lm loss", 2.5f), 0);
}

/* Event(wall_time=1.5, step=3, summary=torch's text("lr", "0.001")).SerializeToString() */
static void test_text_event(void **state)
{
    (void)state;
    static const uint8_t want[] = {
        0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf8, 0x3f, 0x10, 0x03, 0x2a, 0x2e, 0x0a, 0x2c,
        0x0a, 0x0f, 0x6c, 0x72, 0x2f, 0x74, 0x65, 0x78, 0x74, 0x5f, 0x73, 0x75, 0x6d, 0x6d, 0x61,
        0x72, 0x79, 0x42, 0x0f, 0x08, 0x07, 0x12, 0x04, 0x12, 0x02, 0x08, 0x01, 0x42, 0x05, 0x30,
        0x2e, 0x30, 0x30, 0x31, 0x4a, 0x08, 0x0a, 0x06, 0x0a, 0x04, 0x74, 0x65, 0x78, 0x74};
    uint8_t out[256];
    size_t n = mc_tfevent_text(out, sizeof(out), 1.5, 3, "lr", "0.001");
    assert_int_equal(n, sizeof(want));
    assert_memory_equal(out, want, sizeof(want));
    assert_int_equal(mc_tfevent_text(out, 40, 1.5, 3, "lr", "0.001"), 0);
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Reads the records of a file back, checking both CRCs; returns their count or -1. */
static int count_records(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    uint8_t head[12], data[512], tail[4];
    int count = 0;
    while (fread(head, 1, 12, f) == 12) {
        uint64_t len = 0;
        for (int i = 0; i < 8; i++) len |= (uint64_t)head[i] << (8 * i);
        uint32_t c = (uint32_t)head[8] | (uint32_t)head[9] << 8 | (uint32_t)head[10] << 16 |
                     (uint32_t)head[11] << 24;
        if (c != mc_crc32c_masked(mc_crc32c(0, head, 8)) || len > sizeof(data) ||
            fread(data, 1, len, f) != len || fread(tail, 1, 4, f) != 4)
            break;
        c = (uint32_t)tail[0] | (uint32_t)tail[1] << 8 | (uint32_t)tail[2] << 16 |
            (uint32_t)tail[3] << 24;
        if (c != mc_crc32c_masked(mc_crc32c(0, data, len))) break;
        count++;
    }
    fclose(f);
    return count;
}

static void test_writer(void **state)
{
    (void)state;
    char dir[] = "/tmp/mc-tfevents-XXXXXX", sub[128], err[512];
    assert_non_null(mkdtemp(dir));
    snprintf(sub, sizeof(sub), "%s/a/b", dir); /* parents are created */
    mc_tfevents_t w;
    assert_int_equal(mc_tfevents_open(&w, sub, 3, err, sizeof(err)), 0);
    const char *name = strrchr(w.path, '/') + 1;
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    char want_tail[320];
    snprintf(want_tail, sizeof(want_tail), ".%s.%ld.0", host, (long)getpid());
    assert_int_equal(strncmp(name, "events.out.tfevents.", 20), 0);
    assert_true(strlen(name) >= 30 + strlen(want_tail));
    assert_string_equal(name + 30, want_tail);
    /* the version event is on disk at once */
    assert_int_equal(count_records(w.path), 1);
    /* max_queue 3: the third scalar flushes the three */
    assert_int_equal(mc_tfevents_scalar(&w, "lm loss", 1.0, 1, err, sizeof(err)), 0);
    assert_int_equal(mc_tfevents_scalar(&w, "lm loss", 2.0, 2, err, sizeof(err)), 0);
    assert_int_equal(count_records(w.path), 1);
    assert_int_equal(mc_tfevents_scalar(&w, "lm loss", 3.0, 3, err, sizeof(err)), 0);
    assert_int_equal(count_records(w.path), 4);
    assert_int_equal(mc_tfevents_scalar(&w, "lm loss", 4.0, 4, err, sizeof(err)), 0);
    assert_int_equal(mc_tfevents_flush(&w, err, sizeof(err)), 0);
    assert_int_equal(count_records(w.path), 5);
    long size = file_size(w.path);
    assert_int_equal(mc_tfevents_close(&w, err, sizeof(err)), 0);
    assert_int_equal(file_size(w.path), size);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_writer_bad_dir(void **state)
{
    (void)state;
    char err[512] = "";
    mc_tfevents_t w;
    assert_int_equal(mc_tfevents_open(&w, "/dev/null/tb", 10, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "/dev/null"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_vectors), cmocka_unit_test(test_mask),
        cmocka_unit_test(test_record_framing), cmocka_unit_test(test_scalar_event),
        cmocka_unit_test(test_text_event),
        cmocka_unit_test(test_writer),         cmocka_unit_test(test_writer_bad_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
