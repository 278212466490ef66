/* The dataset index cache (data/index_cache.h, --data-cache-path): MD5 against RFC 1321's test
 * suite, NPY files that numpy.load reads (and numpy.save's files read back), Megatron's file
 * layout, reuse only on a matching description (proved with a tampered but well-formed shuffle
 * index that a matching build then uses, and that a changed seed, seq_length, split, sample count
 * or dataset does not), damaged entries rebuilt with a warning, unwritable directories. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/args.h"
#include "data/gpt_dataset.h"
#include "data/index_cache.h"
#include "data/indexed.h"
#include "data/md5.h"
#include "trainer/config.h"

#define PYTHON "/usr/bin/python3"

/* ---- helpers --------------------------------------------------------------------------------- */

/* rm -rf of a test's directory (plain files and directories only). */
static void rm_rf(const char *path)
{
    struct stat st;
    if (lstat(path, &st)) return;
    if (S_ISDIR(st.st_mode)) {
        chmod(path, 0755);
        DIR *d = opendir(path);
        if (d) {
            for (struct dirent *e; (e = readdir(d));) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
                char sub[4096];
                snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
                rm_rf(sub);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

static char *tmpdir(void)
{
    char *d = strdup("/tmp/mc_index_cache_XXXXXX");
    assert_non_null(d);
    assert_non_null(mkdtemp(d));
    return d;
}

static bool have_numpy(void)
{
    return access(PYTHON, X_OK) == 0 &&
           system(PYTHON " -c 'import numpy' >/dev/null 2>&1") == 0;
}

/* A Megatron indexed dataset at prefix: S one-sequence documents of lengths 1..80 (salted),
 * uint16 tokens, the last of each document an eod. */
static void write_dataset(const char *prefix, int S, int salt)
{
    char err[512];
    mc_indexed_writer_t *w = mc_indexed_writer_open(prefix, MC_DTYPE_UINT16, err, sizeof err);
    if (!w) fail_msg("%s", err);
    int32_t tok[100];
    for (int i = 0; i < S; i++) {
        int32_t len = 1 + (i * 7919 + salt * 31) % 80;
        for (int o = 0; o < len; o++) tok[o] = o < len - 1 ? 1 + (i * 131 + o + salt) % 50000 : 50256;
        if (mc_indexed_writer_add_document(w, tok, &len, 1, err, sizeof err)) fail_msg("%s", err);
    }
    if (mc_indexed_writer_finish(w, err, sizeof err)) fail_msg("%s", err);
}

/* stderr into a file while a build runs, to see the warnings. */
typedef struct {
    int saved;
    char path[64];
} capture_t;

static void capture_start(capture_t *c)
{
    fflush(stderr);
    snprintf(c->path, sizeof c->path, "/tmp/mc_index_cache_err_XXXXXX");
    int fd = mkstemp(c->path);
    assert_true(fd >= 0);
    c->saved = dup(2);
    dup2(fd, 2);
    close(fd);
}

/* What was written (malloc'd). */
static char *capture_end(capture_t *c)
{
    fflush(stderr);
    dup2(c->saved, 2);
    close(c->saved);
    FILE *f = fopen(c->path, "rb");
    assert_non_null(f);
    char *buf = calloc(1, 1 << 16);
    assert_non_null(buf);
    size_t k = fread(buf, 1, (1 << 16) - 1, f);
    buf[k] = '\0';
    fclose(f);
    unlink(c->path);
    return buf;
}

static int count_substr(const char *s, const char *sub)
{
    int k = 0;
    for (const char *p = strstr(s, sub); p; p = strstr(p + 1, sub)) k++;
    return k;
}

static mc_index_cache_stats_t stats_now(void)
{
    mc_index_cache_stats_t s;
    mc_index_cache_get_stats(&s);
    return s;
}

/* The standard config of these tests over one prefix. */
static mc_gpt_data_config_t config(char **path, const char *cache)
{
    mc_gpt_data_config_t c = {
        .n_data_path = 1, .data_path = path, .split = "80,15,5", .seq_length = 16, .seed = 7,
        .num_samples = {500, 40, 20}, .mid_level_dataset_surplus = 0.005,
        .drop_last_partial_validation_sequence = true,
        .sample = {.eod = 50256, .pad = MC_PAD_TOKEN_ID}, .cache_path = cache,
    };
    return c;
}

static mc_gpt_datasets_t *build(const mc_gpt_data_config_t *c)
{
    char err[512];
    mc_gpt_datasets_t *D = mc_gpt_datasets_build(c, err, sizeof err);
    if (!D) fail_msg("build: %s", err);
    return D;
}

static const mc_gpt_dataset_t *comp(const mc_gpt_datasets_t *D, int split)
{
    const mc_gpt_dataset_t *g = mc_gpt_datasets_component(D, split, 0);
    assert_non_null(g);
    return g;
}

/* Two datasets' arrays and scalars are identical. */
static void assert_same_dataset(const mc_gpt_dataset_t *a, const mc_gpt_dataset_t *b)
{
    assert_int_equal(a->length, b->length);
    assert_int_equal(a->document_index_len, b->document_index_len);
    assert_int_equal(a->num_epochs, b->num_epochs);
    assert_int_equal(a->sample_index_int64, b->sample_index_int64);
    assert_int_equal(a->shuffle_index_int64, b->shuffle_index_int64);
    assert_memory_equal(a->document_index, b->document_index,
                        sizeof(int32_t) * (size_t)a->document_index_len);
    size_t si = a->sample_index_int64 ? 8 : 4, sh = a->shuffle_index_int64 ? 8 : 4;
    assert_memory_equal(a->sample_index, b->sample_index, si * 2 * (size_t)(a->length + 1));
    if (a->length) assert_memory_equal(a->shuffle_index, b->shuffle_index, sh * (size_t)a->length);
}

static void assert_all_from_cache(const mc_gpt_datasets_t *D, bool want)
{
    for (int s = 0; s < 3; s++) assert_int_equal(comp(D, s)->from_cache, want);
}

/* The entry file of a split in dir ("shuffle_index.npy" ...), found by listing (malloc'd). */
static char *entry_file(const char *dir, const char *split, const char *affix)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    char tail[128];
    snprintf(tail, sizeof tail, "-GPTDataset-%s-%s", split, affix);
    char *found = NULL;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name), t = strlen(tail);
        if (l == 32 + t && !strcmp(e->d_name + 32, tail)) {
            assert_null(found); /* one entry per split */
            found = malloc(strlen(dir) + l + 2);
            assert_non_null(found);
            sprintf(found, "%s/%s", dir, e->d_name);
        }
    }
    closedir(d);
    if (!found) fail_msg("no %s in %s", tail, dir);
    return found;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* ---- MD5 ------------------------------------------------------------------------------------- */

static void test_md5_rfc1321(void **state)
{
    (void)state;
    /* RFC 1321 appendix A.5. */
    static const struct { const char *msg, *want; } rfc[] = {
        {"", "d41d8cd98f00b204e9800998ecf8427e"},
        {"a", "0cc175b9c0f1b6a831c399e269772661"},
        {"abc", "900150983cd24fb0d6963f7d28e17f72"},
        {"message digest", "f96b697d7cb7938d525a2f31aaf161d0"},
        {"abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"},
        {"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
         "d174ab98d277d9f5a5611c2c9f419d9f"},
        {"1234567890" "1234567890" "1234567890" "1234567890" "1234567890" "1234567890"
         "1234567890" "1234567890", "57edf4a22be3c955ac49da2e2107b67a"},
        {"The quick brown fox jumps over the lazy dog", "9e107d9d372bb6826bd81d3542a419d6"},
    };
    char hex[33];
    for (size_t i = 0; i < sizeof rfc / sizeof rfc[0]; i++) {
        mc_md5_hex(rfc[i].msg, strlen(rfc[i].msg), hex);
        assert_string_equal(hex, rfc[i].want);
    }
    /* Padding boundaries: n times 'a' (Python's hashlib). */
    static const struct { int n; const char *want; } pad[] = {
        {55, "ef1772b6dff9a122358552954ad0df65"}, {56, "3b0c8ac703f828b04c6c197006d17218"},
        {57, "652b906d60af96844ebd21b674f35e93"}, {63, "b06521f39153d618550606be297466d5"},
        {64, "014842d480b571495a4a0363793f7367"}, {65, "c743a45e0d2e6a95cb859adae0248435"},
        {119, "8a7bd0732ed6a28ce75f6dabc90e1613"}, {120, "5f61c0ccad4cac44c75ff505e1f1e537"},
        {128, "e510683b3f5ffe4093d021808bc6ff70"},
    };
    char *a = malloc(1000000);
    assert_non_null(a);
    memset(a, 'a', 1000000);
    for (size_t i = 0; i < sizeof pad / sizeof pad[0]; i++) {
        mc_md5_hex(a, (size_t)pad[i].n, hex);
        assert_string_equal(hex, pad[i].want);
    }
    /* A million 'a', streamed in uneven pieces. */
    mc_md5_t c;
    uint8_t d[16];
    mc_md5_init(&c);
    for (size_t off = 0, k = 1; off < 1000000; off += k, k = k * 3 % 1000 + 1)
        mc_md5_update(&c, a + off, off + k > 1000000 ? 1000000 - off : k);
    mc_md5_final(&c, d);
    mc_md5_to_hex(d, hex);
    assert_string_equal(hex, "7707d6ae4e027c70eea2a935c2296f21");
    free(a);
}

/* ---- NPY ------------------------------------------------------------------------------------- */

static void test_npy_numpy_interop(void **state)
{
    (void)state;
    char *dir = tmpdir();
    char path[512], err[512];
    /* Our files, every dtype, 1-D and 2-D, empty, and header lengths that pad differently. */
    static const struct { const char *name, *descr; int ndim; int64_t shape[2]; } A[] = {
        {"i4_empty", "<i4", 1, {0, 0}},      {"i4_one", "<i4", 1, {1, 0}},
        {"i4_17", "<i4", 1, {17, 0}},         {"u4_1000", "<u4", 1, {1000, 0}},
        {"i8_1234567", "<i8", 1, {1234567, 0}}, {"i4_2d", "<i4", 2, {11, 2}},
        {"i8_2d", "<i8", 2, {3, 2}},          {"i4_2d_empty", "<i4", 2, {0, 2}},
    };
    const size_t NA = sizeof A / sizeof A[0];
    void *data[sizeof A / sizeof A[0]];
    for (size_t k = 0; k < NA; k++) {
        size_t isz = mc_npy_itemsize(A[k].descr);
        int64_t count = A[k].shape[0] * (A[k].ndim == 2 ? A[k].shape[1] : 1);
        data[k] = malloc(isz * (size_t)(count ? count : 1));
        assert_non_null(data[k]);
        for (int64_t i = 0; i < count; i++) {
            if (!strcmp(A[k].descr, "<i4")) ((int32_t *)data[k])[i] = (int32_t)(i * 7 - 5);
            if (!strcmp(A[k].descr, "<u4")) ((uint32_t *)data[k])[i] = 4294967295u - (uint32_t)i;
            if (!strcmp(A[k].descr, "<i8"))
                ((int64_t *)data[k])[i] = (i % 2 ? -1 : 1) * (i * 1000003 + ((int64_t)1 << 40));
        }
        snprintf(path, sizeof path, "%s/%s.npy", dir, A[k].name);
        if (mc_npy_write(path, A[k].descr, A[k].ndim, A[k].shape, data[k], err, sizeof err))
            fail_msg("%s", err);
        /* the data starts 64-byte aligned (numpy's ARRAY_ALIGN), with no temporary left */
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal((st.st_size - (off_t)isz * count) % 64, 0);
        assert_int_equal(st.st_mode & 0777, 0644);
        mc_npy_t r;
        if (mc_npy_read(path, &r, err, sizeof err)) fail_msg("%s", err);
        assert_string_equal(r.descr, A[k].descr);
        assert_int_equal(r.ndim, A[k].ndim);
        for (int i = 0; i < A[k].ndim; i++) assert_int_equal(r.shape[i], A[k].shape[i]);
        if (count) assert_memory_equal(r.data, data[k], isz * (size_t)count);
        mc_npy_free(&r);
        /* the raw bytes, for numpy to compare with */
        snprintf(path, sizeof path, "%s/%s.raw", dir, A[k].name);
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        if (count) assert_int_equal(fwrite(data[k], isz, (size_t)count, f), (size_t)count);
        fclose(f);
    }
    DIR *dd = opendir(dir);
    for (struct dirent *e; (e = readdir(dd));) assert_null(strstr(e->d_name, ".tmp."));
    closedir(dd);

    if (!have_numpy()) {
        for (size_t k = 0; k < NA; k++) free(data[k]);
        rm_rf(dir);
        free(dir);
        print_message("skipping: no %s with numpy\n", PYTHON);
        skip();
    }
    /* numpy.load reads ours, identical to the raw bytes; numpy.save writes files we read. */
    char script[] =
        "import sys, numpy as np\n"
        "d = sys.argv[1]\n"
        "cases = [('i4_empty','int32',(0,)),('i4_one','int32',(1,)),('i4_17','int32',(17,)),\n"
        "         ('u4_1000','uint32',(1000,)),('i8_1234567','int64',(1234567,)),\n"
        "         ('i4_2d','int32',(11,2)),('i8_2d','int64',(3,2)),('i4_2d_empty','int32',(0,2))]\n"
        "for name, dt, shape in cases:\n"
        "    a = np.load(d + '/' + name + '.npy', allow_pickle=False)\n"
        "    assert str(a.dtype) == dt and a.shape == shape, (name, a.dtype, a.shape)\n"
        "    assert a.flags['C_CONTIGUOUS']\n"
        "    b = np.fromfile(d + '/' + name + '.raw', dtype=dt).reshape(shape)\n"
        "    assert np.array_equal(a, b), name\n"
        "    m = np.load(d + '/' + name + '.npy', mmap_mode='r')\n"
        "    assert np.array_equal(m, b), name\n"
        "np.save(d + '/py_i4.npy', np.arange(-3, 100, dtype=np.int32))\n"
        "np.save(d + '/py_u4.npy', np.arange(4294967295 - 9, 4294967296, dtype=np.uint32))\n"
        "np.save(d + '/py_i8_2d.npy', (np.arange(14, dtype=np.int64) * 10**12).reshape(7, 2))\n"
        "np.save(d + '/py_f8.npy', np.zeros(3))\n"
        "np.save(d + '/py_fortran.npy', np.asfortranarray(np.zeros((3, 2), dtype=np.int32)))\n";
    snprintf(path, sizeof path, "%s/check.py", dir);
    write_text(path, script);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, PYTHON " %s/check.py %s", dir, dir);
    assert_int_equal(system(cmd), 0);

    mc_npy_t r;
    snprintf(path, sizeof path, "%s/py_i4.npy", dir);
    if (mc_npy_read(path, &r, err, sizeof err)) fail_msg("%s", err);
    assert_string_equal(r.descr, "<i4");
    assert_int_equal(r.ndim, 1);
    assert_int_equal(r.shape[0], 103);
    for (int i = 0; i < 103; i++) assert_int_equal(((int32_t *)r.data)[i], i - 3);
    mc_npy_free(&r);
    snprintf(path, sizeof path, "%s/py_u4.npy", dir);
    if (mc_npy_read(path, &r, err, sizeof err)) fail_msg("%s", err);
    assert_string_equal(r.descr, "<u4");
    assert_int_equal(r.shape[0], 10);
    assert_int_equal(((uint32_t *)r.data)[9], 4294967295u);
    mc_npy_free(&r);
    snprintf(path, sizeof path, "%s/py_i8_2d.npy", dir);
    if (mc_npy_read(path, &r, err, sizeof err)) fail_msg("%s", err);
    assert_string_equal(r.descr, "<i8");
    assert_int_equal(r.ndim, 2);
    assert_int_equal(r.shape[0], 7);
    assert_int_equal(r.shape[1], 2);
    assert_int_equal(((int64_t *)r.data)[13], 13 * 1000000000000ll);
    mc_npy_free(&r);
    /* float64 and Fortran-ordered 2-D arrays are refused, with the reason */
    snprintf(path, sizeof path, "%s/py_f8.npy", dir);
    assert_int_equal(mc_npy_read(path, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "<f8"));
    assert_null(r.data);
    snprintf(path, sizeof path, "%s/py_fortran.npy", dir);
    assert_int_equal(mc_npy_read(path, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "Fortran"));

    for (size_t k = 0; k < NA; k++) free(data[k]);
    rm_rf(dir);
    free(dir);
}

static void test_npy_rejects_damage(void **state)
{
    (void)state;
    char *dir = tmpdir();
    char path[512], err[512];
    int32_t v[40];
    for (int i = 0; i < 40; i++) v[i] = i;
    int64_t shape[2] = {20, 2};
    snprintf(path, sizeof path, "%s/a.npy", dir);
    assert_int_equal(mc_npy_write(path, "<i4", 2, shape, v, err, sizeof err), 0);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char good[512];
    size_t size = fread(good, 1, sizeof good, f);
    fclose(f);
    assert_int_equal(size, 128 + 160); /* a 71-byte header, padded to 128 */

    /* Each variant: the good file with bytes changed or cut. */
    struct { const char *what; size_t size; size_t at; const char *bytes; const char *in_err; } bad[] = {
        {"truncated data", size - 1, 0, NULL, "bytes, expected"},
        {"truncated header", 40, 0, NULL, "header"},
        {"empty", 0, 0, NULL, "not an NPY"},
        {"magic", size, 1, "X", "not an NPY"},
        {"version", size, 6, "\x07", "version"},
        {"dtype", size, 21, ">", "dtype"},
        {"shape", size, 61, ")", "header"},
        {"header length", size, 8, "\x70", "bytes, expected"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        unsigned char b[512];
        memcpy(b, good, size);
        if (bad[k].bytes) memcpy(b + bad[k].at, bad[k].bytes, strlen(bad[k].bytes));
        f = fopen(path, "wb");
        fwrite(b, 1, bad[k].size, f);
        fclose(f);
        mc_npy_t r;
        if (mc_npy_read(path, &r, err, sizeof err) == 0) fail_msg("%s accepted", bad[k].what);
        if (!strstr(err, bad[k].in_err)) fail_msg("%s: %s", bad[k].what, err);
        assert_null(r.data);
    }
    /* Longer than its header says. */
    f = fopen(path, "wb");
    fwrite(good, 1, size, f);
    fputc(0, f);
    fclose(f);
    mc_npy_t r;
    assert_int_equal(mc_npy_read(path, &r, err, sizeof err), -1);
    /* Missing file. */
    snprintf(path, sizeof path, "%s/none.npy", dir);
    assert_int_equal(mc_npy_read(path, &r, err, sizeof err), -1);
    /* Three dimensions and unknown keys. */
    const char *hdrs[] = {"{'descr': '<i4', 'fortran_order': False, 'shape': (1, 1, 1), }",
                          "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), 'x': 1, }",
                          "{'descr': '<i4', 'shape': (1,), }"};
    for (size_t k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s/h.npy", dir);
        f = fopen(path, "wb");
        char h[128];
        int hl = snprintf(h, sizeof h, "%-117s\n", hdrs[k]);
        fwrite("\x93NUMPY\x01\x00", 1, 8, f);
        fputc(hl & 0xff, f);
        fputc(hl >> 8, f);
        fwrite(h, 1, (size_t)hl, f);
        fwrite(v, 4, 1, f);
        fclose(f);
        assert_int_equal(mc_npy_read(path, &r, err, sizeof err), -1);
    }
    rm_rf(dir);
    free(dir);
}

/* ---- the cache in the builder ---------------------------------------------------------------- */

/* Megatron's names: <md5>-GPTDataset-<split>-<affix>, and nothing else (no temporary files). */
static void check_cache_names(const char *cache)
{
    regex_t re;
    assert_int_equal(regcomp(&re, "^[0-9a-f]{32}-GPTDataset-(train|valid|test)-"
                                  "(description\\.txt|document_index\\.npy|sample_index\\.npy|"
                                  "shuffle_index\\.npy)$", REG_EXTENDED | REG_NOSUB), 0);
    DIR *d = opendir(cache);
    assert_non_null(d);
    int files = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        if (regexec(&re, e->d_name, 0, NULL, 0)) fail_msg("unexpected file %s", e->d_name);
        files++;
    }
    closedir(d);
    regfree(&re);
    assert_int_equal(files, 12);
}

/* Each split's description.txt: MD5 named, and what Megatron writes in it. */
static void check_descriptions(const char *cache, const char *prefix)
{
    static const char *const names[3] = {"train", "valid", "test"};
    for (int sp = 0; sp < 3; sp++) {
        char *desc = entry_file(cache, names[sp], "description.txt");
        FILE *f = fopen(desc, "rb");
        char text[8192];
        size_t k = fread(text, 1, sizeof text - 1, f);
        text[k] = '\0';
        fclose(f);
        char hex[33];
        mc_md5_hex(text, k, hex);
        assert_memory_equal(strrchr(desc, '/') + 1, hex, 32);
        assert_non_null(strstr(text, "\"class\": \"GPTDataset\""));
        assert_non_null(strstr(text, prefix));
        char want[64];
        snprintf(want, sizeof want, "\"index_split\": \"%s\"", names[sp]);
        assert_non_null(strstr(text, want));
        assert_non_null(strstr(text, "\"random_seed\": 7"));
        assert_non_null(strstr(text, "\"sequence_length\": 16"));
        assert_non_null(strstr(text, "\"cache_format_version\": 1"));
        free(desc);
    }
}

/* numpy reads the cached arrays with Megatron's dtypes and shapes. */
static void check_numpy(const mc_gpt_dataset_t *g, const char *cache)
{
    if (have_numpy()) {
        char *doc = entry_file(cache, "train", "document_index.npy");
        char *smp = entry_file(cache, "train", "sample_index.npy");
        char *shf = entry_file(cache, "train", "shuffle_index.npy");
        char cmd[4096];
        snprintf(cmd, sizeof cmd,
                 PYTHON " -c \"import numpy as np, sys\n"
                 "d = np.load('%s'); s = np.load('%s'); h = np.load('%s')\n"
                 "assert d.dtype == np.int32 and d.shape == (%lld,), d.shape\n"
                 "assert s.dtype == np.int32 and s.shape == (%lld, 2), s.shape\n"
                 "assert h.dtype == np.uint32 and h.shape == (%lld,), h.shape\n"
                 "assert sorted(h.tolist()) == list(range(%lld))\n"
                 "assert (s[0] == 0).all() and int(d.min()) >= %lld and int(d.max()) < %lld\n"
                 "assert int(h[0]) == %lld and tuple(s[5]) == (%lld, %lld) and int(d[3]) == %d\n\"",
                 doc, smp, shf, (long long)g->document_index_len, (long long)g->length + 1,
                 (long long)g->length, (long long)g->length, (long long)g->seq_begin,
                 (long long)g->seq_end, (long long)mc_gpt_dataset_shuffle_at(g, 0),
                 (long long)((const int32_t *)g->sample_index)[10],
                 (long long)((const int32_t *)g->sample_index)[11], g->document_index[3]);
        assert_int_equal(system(cmd), 0);
        free(doc);
        free(smp);
        free(shf);
    } else {
        print_message("numpy check of the cached arrays skipped: no %s with numpy\n", PYTHON);
    }
}

static void test_cache_layout_and_reuse(void **state)
{
    (void)state;
    char *dir = tmpdir();
    char prefix[512], cache[512];
    snprintf(prefix, sizeof prefix, "%s/ds", dir);
    snprintf(cache, sizeof cache, "%s/some/cache", dir); /* created, parents too */
    write_dataset(prefix, 300, 1);
    char *paths[] = {prefix};

    mc_gpt_data_config_t plain = config(paths, NULL);
    mc_gpt_datasets_t *ref = build(&plain);
    assert_all_from_cache(ref, false);

    mc_index_cache_reset_stats();
    mc_gpt_data_config_t c = config(paths, cache);
    capture_t cap;
    capture_start(&cap);
    mc_gpt_datasets_t *D1 = build(&c);
    char *said = capture_end(&cap);
    assert_string_equal(said, ""); /* a cold cache is silent */
    free(said);
    assert_all_from_cache(D1, false);
    mc_index_cache_stats_t s = stats_now();
    assert_int_equal(s.misses, 3);
    assert_int_equal(s.stored, 3);
    assert_int_equal(s.hits, 0);

    /* Megatron's names: <md5>-GPTDataset-<split>-<affix>, md5 = MD5(description.txt), and
     * nothing else (no temporary files). */
    check_cache_names(cache);
    check_descriptions(cache, prefix);

    /* The second build reads all three entries: the same arrays, from the cache. */
    capture_start(&cap);
    mc_gpt_datasets_t *D2 = build(&c);
    said = capture_end(&cap);
    assert_string_equal(said, "");
    free(said);
    assert_all_from_cache(D2, true);
    s = stats_now();
    assert_int_equal(s.hits, 3);
    assert_int_equal(s.stored, 3);
    assert_int_equal(s.rejected, 0);
    for (int sp = 0; sp < 3; sp++) {
        assert_same_dataset(comp(D1, sp), comp(ref, sp));
        assert_same_dataset(comp(D2, sp), comp(ref, sp));
        assert_int_equal(mc_gpt_datasets_len(D2, sp), mc_gpt_datasets_len(ref, sp));
    }
    /* ... and the same samples. */
    int32_t t1[17], t2[17];
    char err[512];
    for (int64_t i = 0; i < mc_gpt_datasets_len(ref, 0); i += 37) {
        assert_int_equal(mc_gpt_datasets_text(ref, 0, i, t1, err, sizeof err), 0);
        assert_int_equal(mc_gpt_datasets_text(D2, 0, i, t2, err, sizeof err), 0);
        assert_memory_equal(t1, t2, sizeof t1);
    }

    /* numpy reads the cached arrays with Megatron's dtypes and shapes. */
    check_numpy(comp(D2, 0), cache);

    mc_gpt_datasets_free(ref);
    mc_gpt_datasets_free(D1);
    mc_gpt_datasets_free(D2);
    rm_rf(dir);
    free(dir);
}

/* Megatron's default directory: <prefix>/cache/GPTDataset_indices, when --data-cache-path is not
 * given; mc_gpt_data_config_from_args passes the flag through. */
static void test_cache_default_dir(void **state)
{
    (void)state;
    char *dir = tmpdir();
    char prefix[512], want[600];
    snprintf(prefix, sizeof prefix, "%s/corpus_text_document", dir);
    write_dataset(prefix, 200, 2);
    char *paths[] = {prefix};

    mc_args_t a;
    mc_args_defaults(&a);
    mc_gpt_data_config_t c;
    mc_gpt_data_config_from_args(&c, &a, 50256, MC_PAD_TOKEN_ID);
    assert_non_null(c.cache_path);
    assert_string_equal(c.cache_path, "");
    snprintf(a.data_cache_path, sizeof a.data_cache_path, "/somewhere/else");
    mc_gpt_data_config_from_args(&c, &a, 50256, MC_PAD_TOKEN_ID);
    assert_string_equal(c.cache_path, "/somewhere/else");

    char *def = mc_index_cache_default_dir(prefix);
    snprintf(want, sizeof want, "%s/cache/GPTDataset_indices", prefix);
    assert_string_equal(def, want);
    free(def);

    mc_index_cache_reset_stats();
    c = config(paths, "");
    mc_gpt_datasets_t *D = build(&c);
    mc_gpt_datasets_free(D);
    for (int sp = 0; sp < 3; sp++) {
        static const char *const names[3] = {"train", "valid", "test"};
        char *p = entry_file(want, names[sp], "shuffle_index.npy");
        free(p);
    }
    D = build(&c);
    assert_all_from_cache(D, true);
    mc_gpt_datasets_free(D);
    rm_rf(dir);
    free(dir);
}

/* Tamper with the cached train shuffle index (a valid permutation, two entries swapped): a build
 * with the same description uses it; any change to what the indices depend on does not. */
static void test_cache_used_only_on_matching_description(void **state)
{
    (void)state;
    char *dir = tmpdir();
    char prefix[512], cache[512], err[512];
    snprintf(prefix, sizeof prefix, "%s/ds", dir);
    snprintf(cache, sizeof cache, "%s/cache", dir);
    write_dataset(prefix, 300, 3);
    char *paths[] = {prefix};
    mc_gpt_data_config_t c = config(paths, cache);
    mc_gpt_datasets_t *D = build(&c);
    int64_t s0 = mc_gpt_dataset_shuffle_at(comp(D, 0), 0);
    int64_t s1 = mc_gpt_dataset_shuffle_at(comp(D, 0), 1);
    assert_true(s0 != s1);
    mc_gpt_datasets_free(D);

    char *shf = entry_file(cache, "train", "shuffle_index.npy");
    mc_npy_t a;
    if (mc_npy_read(shf, &a, err, sizeof err)) fail_msg("%s", err);
    uint32_t *x = a.data;
    uint32_t t = x[0];
    x[0] = x[1];
    x[1] = t;
    if (mc_npy_write(shf, a.descr, a.ndim, a.shape, a.data, err, sizeof err)) fail_msg("%s", err);
    mc_npy_free(&a);

    /* Same description: the tampered index is what is used. */
    mc_index_cache_reset_stats();
    D = build(&c);
    assert_all_from_cache(D, true);
    assert_int_equal(mc_gpt_dataset_shuffle_at(comp(D, 0), 0), s1);
    assert_int_equal(mc_gpt_dataset_shuffle_at(comp(D, 0), 1), s0);
    mc_gpt_datasets_free(D);
    assert_int_equal(stats_now().rejected, 0);

    /* Changed seed, seq_length, split, sample count, drop-last flag: other entries, built. */
    for (int v = 0; v < 5; v++) {
        mc_gpt_data_config_t c2 = config(paths, cache);
        if (v == 0) c2.seed = 8;
        if (v == 1) c2.seq_length = 15;
        if (v == 2) c2.split = "70,25,5";
        if (v == 3) c2.num_samples[0] = 501;
        if (v == 4) c2.drop_last_partial_validation_sequence = false;
        mc_gpt_datasets_t *E = build(&c2);
        c2.cache_path = NULL;
        mc_gpt_datasets_t *R = build(&c2);
        /* train's description changes in all but v = 4, valid's in all but v = 3 */
        assert_int_equal(comp(E, 0)->from_cache, v == 4);
        assert_int_equal(comp(E, 1)->from_cache, v == 3);
        for (int sp = 0; sp < 3; sp++)
            if (!comp(E, sp)->from_cache) assert_same_dataset(comp(E, sp), comp(R, sp));
        /* where train's description is unchanged, its tampered entry is still what is used */
        assert_int_equal(mc_gpt_dataset_shuffle_at(comp(E, 0), 0),
                         v == 4 ? s1 : mc_gpt_dataset_shuffle_at(comp(R, 0), 0));
        mc_gpt_datasets_free(E);
        mc_gpt_datasets_free(R);
    }
    /* The dataset itself changed under the same prefix (other sequence lengths): rebuilt. */
    write_dataset(prefix, 300, 4);
    D = build(&c);
    for (int sp = 0; sp < 3; sp++) assert_false(comp(D, sp)->from_cache);
    mc_gpt_data_config_t plain = config(paths, NULL);
    mc_gpt_datasets_t *R = build(&plain);
    for (int sp = 0; sp < 3; sp++) assert_same_dataset(comp(D, sp), comp(R, sp));
    mc_gpt_datasets_free(D);
    mc_gpt_datasets_free(R);
    /* Back to the first data and flags: the tampered entry is still there and used. */
    write_dataset(prefix, 300, 3);
    D = build(&c);
    assert_all_from_cache(D, true);
    assert_int_equal(mc_gpt_dataset_shuffle_at(comp(D, 0), 0), s1);
    mc_gpt_datasets_free(D);

    free(shf);
    rm_rf(dir);
    free(dir);
}

/* A damaged entry is a warning and a rebuild (then rewritten: the next build is a clean hit). */
static void test_cache_damage_rebuilds(void **state)
{
    (void)state;
    char *dir = tmpdir();
    char prefix[512], cache[512], err[512];
    snprintf(prefix, sizeof prefix, "%s/ds", dir);
    snprintf(cache, sizeof cache, "%s/cache", dir);
    write_dataset(prefix, 300, 5);
    char *paths[] = {prefix};
    mc_gpt_data_config_t plain = config(paths, NULL), c = config(paths, cache);
    mc_gpt_datasets_t *R = build(&plain);
    mc_gpt_datasets_free(build(&c));

    static const char *const what[] = {
        "truncated shuffle index", "bad NPY magic", "description edited", "array missing",
        "wrong dtype", "value out of range", "wrong shape", "description truncated",
    };
    for (size_t v = 0; v < sizeof what / sizeof what[0]; v++) {
        char *doc = entry_file(cache, "train", "document_index.npy");
        char *smp = entry_file(cache, "train", "sample_index.npy");
        char *shf = entry_file(cache, "train", "shuffle_index.npy");
        char *desc = entry_file(cache, "train", "description.txt");
        mc_npy_t a;
        switch (v) {
        case 0: assert_int_equal(truncate(shf, 100), 0); break;
        case 1: {
            int fd = open(smp, O_WRONLY);
            assert_int_equal(pwrite(fd, "XXXX", 4, 0), 4);
            close(fd);
            break;
        }
        case 2: {
            FILE *f = fopen(desc, "r+b");
            char text[8192];
            size_t k = fread(text, 1, sizeof text - 1, f);
            text[k] = '\0';
            char *p = strstr(text, "\"random_seed\": 7");
            assert_non_null(p);
            p[15] = '9';
            rewind(f);
            fwrite(text, 1, k, f);
            fclose(f);
            break;
        }
        case 3: assert_int_equal(unlink(doc), 0); break;
        case 4: { /* document_index as int64: valid NPY, wrong dtype */
            if (mc_npy_read(doc, &a, err, sizeof err)) fail_msg("%s", err);
            int64_t *w = malloc(8 * (size_t)a.shape[0]);
            for (int64_t i = 0; i < a.shape[0]; i++) w[i] = ((int32_t *)a.data)[i];
            assert_int_equal(mc_npy_write(doc, "<i8", 1, a.shape, w, err, sizeof err), 0);
            free(w);
            mc_npy_free(&a);
            break;
        }
        case 5: { /* a shuffle entry pointing past the sample index */
            if (mc_npy_read(shf, &a, err, sizeof err)) fail_msg("%s", err);
            ((uint32_t *)a.data)[3] = (uint32_t)a.shape[0];
            assert_int_equal(mc_npy_write(shf, a.descr, 1, a.shape, a.data, err, sizeof err), 0);
            mc_npy_free(&a);
            break;
        }
        case 6: { /* one sample fewer, consistently */
            if (mc_npy_read(shf, &a, err, sizeof err)) fail_msg("%s", err);
            int64_t sh = a.shape[0] - 1;
            uint32_t *u = a.data;
            for (int64_t i = 0; i < sh; i++) u[i] = (uint32_t)i;
            assert_int_equal(mc_npy_write(shf, a.descr, 1, &sh, a.data, err, sizeof err), 0);
            mc_npy_free(&a);
            break;
        }
        case 7: assert_int_equal(truncate(desc, 10), 0); break;
        }
        mc_index_cache_reset_stats();
        capture_t cap;
        capture_start(&cap);
        mc_gpt_datasets_t *D = build(&c);
        char *said = capture_end(&cap);
        if (count_substr(said, "megatron-c: warning: ignoring the dataset index cache entry") != 1)
            fail_msg("%s: expected one warning, got: %s", what[v], said);
        assert_non_null(strstr(said, "-GPTDataset-train-"));
        free(said);
        assert_false(comp(D, 0)->from_cache);
        assert_true(comp(D, 1)->from_cache);
        assert_true(comp(D, 2)->from_cache);
        for (int sp = 0; sp < 3; sp++) assert_same_dataset(comp(D, sp), comp(R, sp));
        mc_index_cache_stats_t s = stats_now();
        assert_int_equal(s.rejected, 1);
        assert_int_equal(s.stored, 1);
        assert_int_equal(s.warnings, 1);
        mc_gpt_datasets_free(D);
        /* rewritten: clean */
        capture_start(&cap);
        D = build(&c);
        said = capture_end(&cap);
        assert_string_equal(said, "");
        free(said);
        assert_all_from_cache(D, true);
        for (int sp = 0; sp < 3; sp++) assert_same_dataset(comp(D, sp), comp(R, sp));
        mc_gpt_datasets_free(D);
        free(doc);
        free(smp);
        free(shf);
        free(desc);
    }
    mc_gpt_datasets_free(R);
    rm_rf(dir);
    free(dir);
}

/* A cache directory that cannot be created or written: one warning, the build goes on in
 * memory. (A path under a regular file fails for root too.) */
static void test_cache_unwritable(void **state)
{
    (void)state;
    char *dir = tmpdir();
    char prefix[512], cache[512], file[512];
    snprintf(prefix, sizeof prefix, "%s/ds", dir);
    snprintf(file, sizeof file, "%s/a_file", dir);
    snprintf(cache, sizeof cache, "%s/a_file/cache", dir);
    write_dataset(prefix, 300, 6);
    write_text(file, "not a directory\n");
    char *paths[] = {prefix};
    mc_gpt_data_config_t plain = config(paths, NULL), c = config(paths, cache);
    mc_gpt_datasets_t *R = build(&plain);

    mc_index_cache_reset_stats();
    capture_t cap;
    capture_start(&cap);
    mc_gpt_datasets_t *D = build(&c);
    mc_gpt_datasets_t *D2 = build(&c);
    char *said = capture_end(&cap);
    assert_int_equal(count_substr(said, "megatron-c: warning:"), 1);
    assert_non_null(strstr(said, "cannot write the dataset index cache in"));
    assert_non_null(strstr(said, "a_file/cache"));
    free(said);
    mc_index_cache_stats_t s = stats_now();
    assert_int_equal(s.store_failures, 6);
    assert_int_equal(s.stored, 0);
    assert_int_equal(s.warnings, 1);
    for (int sp = 0; sp < 3; sp++) {
        assert_same_dataset(comp(D, sp), comp(R, sp));
        assert_same_dataset(comp(D2, sp), comp(R, sp));
    }
    assert_all_from_cache(D2, false);
    mc_gpt_datasets_free(D);
    mc_gpt_datasets_free(D2);

    /* A directory without write permission (meaningful when not root). */
    char ro[512];
    snprintf(ro, sizeof ro, "%s/ro", dir);
    assert_int_equal(mkdir(ro, 0555), 0);
    c.cache_path = ro;
    mc_index_cache_reset_stats();
    capture_start(&cap);
    D = build(&c);
    said = capture_end(&cap);
    for (int sp = 0; sp < 3; sp++) assert_same_dataset(comp(D, sp), comp(R, sp));
    if (geteuid() != 0) {
        assert_int_equal(count_substr(said, "megatron-c: warning:"), 1);
        assert_int_equal(stats_now().store_failures, 3);
    }
    free(said);
    mc_gpt_datasets_free(D);
    chmod(ro, 0755);

    mc_gpt_datasets_free(R);
    rm_rf(dir);
    free(dir);
}

/* Several processes building the same cold entries at once (ranks starting together): every one
 * succeeds, and what is left is one complete, correct entry per split and no temporary file. */
static void test_cache_concurrent_builders(void **state)
{
    (void)state;
    char *dir = tmpdir();
    char prefix[512], cache[512];
    snprintf(prefix, sizeof prefix, "%s/ds", dir);
    snprintf(cache, sizeof cache, "%s/cache", dir);
    write_dataset(prefix, 400, 7);
    char *paths[] = {prefix};
    mc_gpt_data_config_t plain = config(paths, NULL), c = config(paths, cache);
    c.num_samples[0] = 20000; /* bigger arrays: longer writes, more overlap */
    plain.num_samples[0] = 20000;
    fflush(NULL);
    pid_t kids[6];
    for (int k = 0; k < 6; k++) {
        kids[k] = fork();
        assert_true(kids[k] >= 0);
        if (kids[k] == 0) {
            for (int r = 0; r < 3; r++) {
                char err[512];
                mc_gpt_datasets_t *D = mc_gpt_datasets_build(&c, err, sizeof err);
                if (!D) _exit(1);
                mc_gpt_datasets_free(D);
            }
            _exit(0);
        }
    }
    for (int k = 0; k < 6; k++) {
        int st;
        assert_int_equal(waitpid(kids[k], &st, 0), kids[k]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    mc_gpt_datasets_t *R = build(&plain);
    mc_index_cache_reset_stats();
    capture_t cap;
    capture_start(&cap);
    mc_gpt_datasets_t *D = build(&c);
    char *said = capture_end(&cap);
    assert_string_equal(said, "");
    free(said);
    assert_all_from_cache(D, true);
    for (int sp = 0; sp < 3; sp++) assert_same_dataset(comp(D, sp), comp(R, sp));
    DIR *d = opendir(cache);
    int files = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        assert_null(strstr(e->d_name, ".tmp."));
        files++;
    }
    closedir(d);
    assert_int_equal(files, 12);
    mc_gpt_datasets_free(D);
    mc_gpt_datasets_free(R);
    rm_rf(dir);
    free(dir);
}

/* mc_gpt_dataset_build_cached on bare sequence lengths: errors are mc_gpt_dataset_build's and
 * nothing is written for a configuration Megatron would reject. */
static void test_cache_errors_not_cached(void **state)
{
    (void)state;
    char *dir = tmpdir();
    int32_t len[50];
    for (int i = 0; i < 50; i++) len[i] = 1 + i % 9;
    mc_gpt_index_cache_t cache = {.dir = dir, .dataset_path = "bare"};
    mc_gpt_dataset_t d, e;
    char err1[512], err2[512];
    /* an empty split */
    assert_int_equal(mc_gpt_dataset_build_cached(&d, len, 50, 10, 10, 5, 1, 16, 1, true, &cache,
                                                 err1, sizeof err1), -1);
    assert_int_equal(mc_gpt_dataset_build(&e, len, 50, 10, 10, 5, 1, 16, 1, true, err2,
                                          sizeof err2), -1);
    assert_string_equal(err1, err2);
    /* a bad seed */
    assert_int_equal(mc_gpt_dataset_build_cached(&d, len, 50, 0, 50, 5, 0, 16, -1, true, &cache,
                                                 err1, sizeof err1), -1);
    DIR *dd = opendir(dir);
    int files = 0;
    for (struct dirent *x; (x = readdir(dd));) files += x->d_name[0] != '.';
    closedir(dd);
    assert_int_equal(files, 0);
    /* a good one, twice: built then read, equal to the plain build */
    assert_int_equal(mc_gpt_dataset_build_cached(&d, len, 50, 0, 40, 30, 0, 8, 3, true, &cache,
                                                 err1, sizeof err1), 0);
    assert_false(d.from_cache);
    mc_gpt_dataset_free(&d);
    assert_int_equal(mc_gpt_dataset_build_cached(&d, len, 50, 0, 40, 30, 0, 8, 3, true, &cache,
                                                 err1, sizeof err1), 0);
    assert_true(d.from_cache);
    assert_int_equal(mc_gpt_dataset_build(&e, len, 50, 0, 40, 30, 0, 8, 3, true, err2,
                                          sizeof err2), 0);
    assert_same_dataset(&d, &e);
    assert_int_equal(d.num_epochs, e.num_epochs);
    assert_int_equal(d.separate_final_epoch, e.separate_final_epoch);
    assert_int_equal(d.tokens_per_epoch, e.tokens_per_epoch);
    mc_gpt_dataset_free(&d);
    mc_gpt_dataset_free(&e);
    rm_rf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_md5_rfc1321),
        cmocka_unit_test(test_npy_numpy_interop),
        cmocka_unit_test(test_npy_rejects_damage),
        cmocka_unit_test(test_cache_layout_and_reuse),
        cmocka_unit_test(test_cache_default_dir),
        cmocka_unit_test(test_cache_used_only_on_matching_description),
        cmocka_unit_test(test_cache_damage_rebuilds),
        cmocka_unit_test(test_cache_unwritable),
        cmocka_unit_test(test_cache_concurrent_builders),
        cmocka_unit_test(test_cache_errors_not_cached),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
