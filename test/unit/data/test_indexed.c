/* Megatron's indexed dataset (MEGATRON.md section 1): the reader against Megatron's own files,
 * the writer byte-for-byte against them, add_index, and the reader's validation against
 * corrupt and truncated files (run under ASan to show nothing is read out of bounds).
 *
 * The reference files come from $MEGATRON_C_SHARED/data/megatron-ref (default ../shared from
 * the repo root): tinyshakespeare_text_document.{bin,idx} written by Megatron's
 * preprocess_data.py, and tinyshakespeare_tokens.jsonl with each document's tokens. Tests that
 * need them are skipped when they are absent; all others build their data in a temp dir. */
#define _GNU_SOURCE /* nftw */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/indexed.h"

/* ---- shared state: a temp dir and the reference documents ---- */

static char g_tmp[512];

typedef struct {
    int64_t n_docs;
    int32_t **tok;
    int32_t *len;
    int64_t total;
} docs_t;

static docs_t g_ref;           /* empty when the reference files are absent */
static char g_ref_prefix[1024];

static const char *shared_dir(void)
{
    const char *s = getenv("MEGATRON_C_SHARED");
    return s && *s ? s : "../shared";
}

static void free_docs(docs_t *d)
{
    for (int64_t i = 0; i < d->n_docs; i++) free(d->tok[i]);
    free(d->tok);
    free(d->len);
    memset(d, 0, sizeof(*d));
}

/* One JSON array of token ids per line. Returns -1 (and prints why) if unreadable. */
static int load_jsonl(const char *path, docs_t *d)
{
    memset(d, 0, sizeof(*d));
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char *line = NULL;
    size_t cap = 0;
    int64_t cap_docs = 0;
    int rc = 0;
    while (rc == 0 && getline(&line, &cap, f) > 0) {
        json_error_t je;
        json_t *a = json_loads(line, 0, &je);
        if (!json_is_array(a)) {
            fprintf(stderr, "%s:%lld: not a JSON array\n", path, (long long)d->n_docs + 1);
            json_decref(a);
            rc = -1;
            break;
        }
        if (d->n_docs == cap_docs) {
            cap_docs = cap_docs ? 2 * cap_docs : 1024;
            d->tok = realloc(d->tok, (size_t)cap_docs * sizeof(*d->tok));
            d->len = realloc(d->len, (size_t)cap_docs * sizeof(*d->len));
        }
        size_t n = json_array_size(a);
        int32_t *t = malloc((n ? n : 1) * sizeof(*t));
        for (size_t i = 0; i < n; i++) t[i] = (int32_t)json_integer_value(json_array_get(a, i));
        d->tok[d->n_docs] = t;
        d->len[d->n_docs] = (int32_t)n;
        d->n_docs++;
        d->total += (int64_t)n;
        json_decref(a);
    }
    free(line);
    fclose(f);
    if (rc) free_docs(d);
    return rc;
}

static int setup(void **state)
{
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(g_tmp, sizeof(g_tmp), "%s/mc_indexed_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(g_tmp)) return -1;
    snprintf(g_ref_prefix, sizeof(g_ref_prefix),
             "%s/data/megatron-ref/tinyshakespeare_text_document", shared_dir());
    char jsonl[1100];
    snprintf(jsonl, sizeof(jsonl), "%s/data/megatron-ref/tinyshakespeare_tokens.jsonl",
             shared_dir());
    if (load_jsonl(jsonl, &g_ref)) memset(&g_ref, 0, sizeof(g_ref));
    return 0;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    remove(path);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    nftw(g_tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free_docs(&g_ref);
    return 0;
}

static void need_reference(void)
{
    char idx[1100];
    snprintf(idx, sizeof(idx), "%s.idx", g_ref_prefix);
    if (g_ref.n_docs == 0 || access(idx, R_OK) != 0) {
        print_message("reference files not found under %s/data/megatron-ref "
                      "(set MEGATRON_C_SHARED)\n", shared_dir());
        skip();
    }
}

/* ---- file helpers ---- */

/* A fresh, empty directory g_tmp/<name>; its path goes to dir. */
static void subdir(char *dir, size_t n, const char *name)
{
    snprintf(dir, n, "%s/%s", g_tmp, name);
    assert_int_equal(mkdir(dir, 0777), 0);
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)sz + 1);
    assert_int_equal(fread(b, 1, (size_t)sz, f), (size_t)sz);
    fclose(f);
    *n = (size_t)sz;
    return b;
}

static void spit(const char *path, const uint8_t *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

static void assert_same_file(const char *a, const char *b)
{
    size_t na, nb;
    uint8_t *x = slurp(a, &na), *y = slurp(b, &nb);
    size_t i = 0;
    while (i < na && i < nb && x[i] == y[i]) i++;
    free(x);
    free(y);
    if (i < na || i < nb)
        fail_msg("%s (%zu bytes) and %s (%zu bytes) differ at byte %zu", a, na, b, nb, i);
}

static void assert_same_dataset(const char *p, const char *q)
{
    char a[1100], b[1100];
    snprintf(a, sizeof(a), "%s.bin", p);
    snprintf(b, sizeof(b), "%s.bin", q);
    assert_same_file(a, b);
    snprintf(a, sizeof(a), "%s.idx", p);
    snprintf(b, sizeof(b), "%s.idx", q);
    assert_same_file(a, b);
}

static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

/* ---- writing helpers ---- */

/* Writes documents [from, to) of docs, one sequence per non-empty document, as preprocess_data
 * does without --split-sentences (an empty document gets no sequence). */
static void write_docs(const char *prefix, int dtype, const docs_t *d, int64_t from, int64_t to)
{
    char err[512] = "";
    mc_indexed_writer_t *w = mc_indexed_writer_open(prefix, dtype, err, sizeof(err));
    if (!w) fail_msg("%s", err);
    for (int64_t i = from; i < to; i++)
        if (mc_indexed_writer_add_document(w, d->tok[i], &d->len[i], d->len[i] > 0 ? 1 : 0, err,
                                           sizeof(err)))
            fail_msg("%s", err);
    if (mc_indexed_writer_finish(w, err, sizeof(err))) fail_msg("%s", err);
}

/* The small dataset the corruption tests damage: uint16, documents {[1,2,3],[4,5]}, {},
 * {[6,7,8,9]}: S = 3, D = 4; .idx: lengths at 34, pointers at 46, document_indices at 70,
 * 102 bytes in all; .bin 18 bytes. */
enum { SMALL_IDX = 102, SMALL_BIN = 18, OFF_LEN = 34, OFF_PTR = 46, OFF_DOC = 70 };

static void add(mc_indexed_writer_t *w, const int32_t *t, const int32_t *len, int n)
{
    char err[512] = "";
    if (mc_indexed_writer_add_document(w, t, len, n, err, sizeof(err))) fail_msg("%s", err);
}

static void finish(mc_indexed_writer_t *w)
{
    char err[512] = "";
    if (mc_indexed_writer_finish(w, err, sizeof(err))) fail_msg("%s", err);
}

static void write_small(const char *prefix)
{
    char err[512] = "";
    mc_indexed_writer_t *w = mc_indexed_writer_open(prefix, MC_DTYPE_UINT16, err, sizeof(err));
    if (!w) fail_msg("%s", err);
    const int32_t t0[] = {1, 2, 3, 4, 5}, l0[] = {3, 2}, t2[] = {6, 7, 8, 9}, l2[] = {4};
    add(w, t0, l0, 2);
    add(w, NULL, NULL, 0);
    add(w, t2, l2, 1);
    finish(w);
}

static void open_ok(mc_indexed_t *d, const char *prefix, bool multimodal)
{
    char err[512] = "";
    if (mc_indexed_open(d, prefix, multimodal, err, sizeof(err))) fail_msg("%s", err);
}

static void get_ok(const mc_indexed_t *d, int64_t seq, int64_t off, int64_t len, int32_t *out)
{
    char err[512] = "";
    if (mc_indexed_get(d, seq, off, len, out, err, sizeof(err))) fail_msg("%s", err);
}

/* err must be exactly one non-empty line containing `name` and `what`. */
static void assert_one_line(const char *err, const char *name, const char *what)
{
    if (!*err || strchr(err, '\n') || !strstr(err, name) || (what && !strstr(err, what)))
        fail_msg("expected one line naming '%s' and saying '%s', got '%s'", name,
                 what ? what : "", err);
}

/* ---- (1) Megatron's own files ---- */

static void test_optimal_dtype_and_sizes(void **state)
{
    (void)state;
    assert_int_equal(mc_indexed_optimal_dtype(50257), MC_DTYPE_UINT16);
    assert_int_equal(mc_indexed_optimal_dtype(65499), MC_DTYPE_UINT16);
    assert_int_equal(mc_indexed_optimal_dtype(65500), MC_DTYPE_INT32);
    assert_int_equal(mc_indexed_optimal_dtype(128256), MC_DTYPE_INT32);
    const int sizes[] = {0, 1, 1, 2, 4, 8, 8, 4, 2, 0};
    for (int c = 0; c <= 9; c++) assert_int_equal(mc_indexed_dtype_size(c), sizes[c]);
    assert_string_equal(mc_indexed_dtype_name(MC_DTYPE_UINT16), "uint16");
    assert_string_equal(mc_indexed_dtype_name(MC_DTYPE_FLOAT64), "float64");
    assert_string_equal(mc_indexed_dtype_name(0), "invalid");
}

static void assert_doc_tokens(const mc_indexed_t *d, int64_t doc, const docs_t *ref)
{
    int32_t *buf = malloc(((size_t)ref->len[doc] + 1) * sizeof(*buf));
    int64_t at = 0;
    for (int64_t s = d->document_indices[doc]; s < d->document_indices[doc + 1]; s++) {
        assert_true(at + d->sequence_lengths[s] <= ref->len[doc]);
        get_ok(d, s, 0, d->sequence_lengths[s], buf + at);
        at += d->sequence_lengths[s];
    }
    assert_int_equal(at, ref->len[doc]);
    for (int64_t i = 0; i < at; i++)
        if (buf[i] != ref->tok[doc][i])
            fail_msg("document %lld token %lld: %d, jsonl says %d", (long long)doc, (long long)i,
                     buf[i], ref->tok[doc][i]);
    free(buf);
}

static void test_reference_read(void **state)
{
    (void)state;
    need_reference();
    mc_indexed_t d;
    open_ok(&d, g_ref_prefix, false);
    assert_int_equal(d.dtype, MC_DTYPE_UINT16);
    assert_int_equal(d.itemsize, 2);
    assert_int_equal(d.num_documents, 7222);
    assert_int_equal(d.num_sequences, 7222); /* one sequence per document */
    assert_null(d.sequence_modes);
    int64_t total = 0;
    for (int64_t i = 0; i < d.num_sequences; i++) total += d.sequence_lengths[i];
    assert_int_equal(total, 330807);
    assert_int_equal(d.bin_size, 2 * 330807);
    assert_int_equal(d.idx_size, 34 + 12 * 7222 + 8 * 7223);

    /* Independently of the jsonl: the first tokens of "First Citizen:\n..." (GPT-2) and EOD. */
    int32_t head[5];
    get_ok(&d, 0, 0, 5, head);
    const int32_t want[5] = {5962, 22307, 25, 198, 8421};
    assert_memory_equal(head, want, sizeof(want));
    get_ok(&d, 0, d.sequence_lengths[0] - 1, 1, head);
    assert_int_equal(head[0], 50256);

    assert_int_equal(g_ref.n_docs, 7222);
    assert_int_equal(g_ref.total, 330807);
    assert_doc_tokens(&d, 0, &g_ref);
    assert_doc_tokens(&d, 1, &g_ref);
    assert_doc_tokens(&d, 7221, &g_ref);
    for (int64_t doc = 2; doc < 7221; doc++) assert_doc_tokens(&d, doc, &g_ref);
    mc_indexed_close(&d);
}

/* ---- (2) the writer reproduces Megatron's files ---- */

static void test_reference_write(void **state)
{
    (void)state;
    need_reference();
    char dir[600], prefix[700];
    subdir(dir, sizeof(dir), "refwrite");
    snprintf(prefix, sizeof(prefix), "%s/tinyshakespeare_text_document", dir);
    int empty = 0;
    for (int64_t i = 0; i < g_ref.n_docs; i++) empty += g_ref.len[i] == 0;
    print_message("jsonl: %lld documents, %d empty\n", (long long)g_ref.n_docs, empty);
    write_docs(prefix, mc_indexed_optimal_dtype(50257), &g_ref, 0, g_ref.n_docs);
    assert_same_dataset(prefix, g_ref_prefix);
    assert_int_equal(count_entries(dir), 2); /* no .tmp left behind */
}

/* ---- (3) add_index ---- */

static void test_reference_add_index_halves(void **state)
{
    (void)state;
    need_reference();
    char dir[600], a[700], b[700], c[700], err[512] = "";
    subdir(dir, sizeof(dir), "refhalves");
    snprintf(a, sizeof(a), "%s/a", dir);
    snprintf(b, sizeof(b), "%s/b", dir);
    snprintf(c, sizeof(c), "%s/c", dir);
    int64_t half = g_ref.n_docs / 2;
    write_docs(a, MC_DTYPE_UINT16, &g_ref, 0, half);
    write_docs(b, MC_DTYPE_UINT16, &g_ref, half, g_ref.n_docs);
    mc_indexed_writer_t *w = mc_indexed_writer_open(c, MC_DTYPE_UINT16, err, sizeof(err));
    assert_non_null(w);
    if (mc_indexed_writer_add_index(w, a, err, sizeof(err))) fail_msg("%s", err);
    if (mc_indexed_writer_add_index(w, b, err, sizeof(err))) fail_msg("%s", err);
    finish(w);
    assert_same_dataset(c, g_ref_prefix);
}

/* Multi-sequence and empty documents, an empty dataset, and add_document between add_index
 * calls: the merge equals writing the same documents directly. */
static void test_add_index_synthetic(void **state)
{
    (void)state;
    char dir[600], whole[700], a[700], b[700], e[700], m[700], err[512] = "";
    subdir(dir, sizeof(dir), "merge");
    snprintf(whole, sizeof(whole), "%s/whole", dir);
    snprintf(a, sizeof(a), "%s/a", dir);
    snprintf(b, sizeof(b), "%s/b", dir);
    snprintf(e, sizeof(e), "%s/empty", dir);
    snprintf(m, sizeof(m), "%s/merged", dir);
    const int32_t t1[] = {10, 11, 12}, l1[] = {1, 2}, t3[] = {13, 14, 15, 16}, l3[] = {2, 0, 2};
    const int32_t t4[] = {17}, l4[] = {1}, t5[] = {18, 19}, l5[] = {2};

    mc_indexed_writer_t *w = mc_indexed_writer_open(whole, MC_DTYPE_INT32, err, sizeof(err));
    add(w, t1, l1, 2); add(w, NULL, NULL, 0); add(w, t3, l3, 3);   /* part a */
    add(w, t4, l4, 1);                                            /* direct */
    add(w, t5, l5, 1); add(w, NULL, NULL, 0);                      /* part b */
    finish(w);

    w = mc_indexed_writer_open(a, MC_DTYPE_INT32, err, sizeof(err));
    add(w, t1, l1, 2); add(w, NULL, NULL, 0); add(w, t3, l3, 3);
    finish(w);
    w = mc_indexed_writer_open(b, MC_DTYPE_INT32, err, sizeof(err));
    add(w, t5, l5, 1); add(w, NULL, NULL, 0);
    finish(w);
    w = mc_indexed_writer_open(e, MC_DTYPE_INT32, err, sizeof(err));
    finish(w);

    w = mc_indexed_writer_open(m, MC_DTYPE_INT32, err, sizeof(err));
    if (mc_indexed_writer_add_index(w, a, err, sizeof(err))) fail_msg("%s", err);
    add(w, t4, l4, 1);
    if (mc_indexed_writer_add_index(w, e, err, sizeof(err))) fail_msg("%s", err);
    if (mc_indexed_writer_add_index(w, b, err, sizeof(err))) fail_msg("%s", err);
    finish(w);
    assert_same_dataset(m, whole);

    mc_indexed_t d;
    open_ok(&d, m, false);
    assert_int_equal(d.num_sequences, 7);
    assert_int_equal(d.num_documents, 6);
    const int64_t di[] = {0, 2, 2, 5, 6, 7, 7};
    assert_memory_equal(d.document_indices, di, sizeof(di));
    mc_indexed_close(&d);

    /* dtype mismatch (Megatron asserts), a missing dataset: errors, the writer stays usable */
    w = mc_indexed_writer_open(m, MC_DTYPE_UINT16, err, sizeof(err));
    assert_int_equal(mc_indexed_writer_add_index(w, a, err, sizeof(err)), -1);
    assert_one_line(err, a, "int32");
    snprintf(e, sizeof(e), "%s/missing", dir);
    assert_int_equal(mc_indexed_writer_add_index(w, e, err, sizeof(err)), -1);
    assert_one_line(err, "missing.idx", "cannot open");
    mc_indexed_writer_abort(w);
}

/* add_index copies the whole .bin as Megatron does, so a dataset whose pointers are not back to
 * back (valid for the reader) must be refused rather than merged wrongly. */
static void test_add_index_refuses_gaps(void **state)
{
    (void)state;
    char dir[600], p[700], q[700], path[800], err[512] = "";
    subdir(dir, sizeof(dir), "gaps");
    snprintf(p, sizeof(p), "%s/p", dir);
    snprintf(q, sizeof(q), "%s/q", dir);
    write_small(p);
    snprintf(path, sizeof(path), "%s.bin", p);
    size_t n;
    uint8_t *bin = slurp(path, &n);
    uint8_t more[SMALL_BIN + 2];
    memcpy(more, bin, n);
    more[n] = more[n + 1] = 0;
    spit(path, more, sizeof(more)); /* trailing bytes: the reader accepts them, like Megatron */
    free(bin);
    mc_indexed_t d;
    open_ok(&d, p, false);
    mc_indexed_close(&d);
    mc_indexed_writer_t *w = mc_indexed_writer_open(q, MC_DTYPE_UINT16, err, sizeof(err));
    assert_int_equal(mc_indexed_writer_add_index(w, p, err, sizeof(err)), -1);
    assert_one_line(err, p, "back to back");
    mc_indexed_writer_abort(w);
}

/* ---- the exact layout, independent of the reference files ---- */

static void test_small_layout(void **state)
{
    (void)state;
    char dir[600], p[700], path[800];
    subdir(dir, sizeof(dir), "layout");
    snprintf(p, sizeof(p), "%s/s", dir);
    write_small(p);
    size_t n;
    snprintf(path, sizeof(path), "%s.idx", p);
    uint8_t *idx = slurp(path, &n);
    assert_int_equal(n, SMALL_IDX);
    assert_memory_equal(idx, "MMIDIDX\0\0", 9);
    assert_int_equal(get64(idx + 9), 1);
    assert_int_equal(idx[17], MC_DTYPE_UINT16);
    assert_int_equal(get64(idx + 18), 3);
    assert_int_equal(get64(idx + 26), 4);
    const uint32_t len[] = {3, 2, 4};
    const uint64_t ptr[] = {0, 6, 10}, doc[] = {0, 2, 2, 3};
    for (int i = 0; i < 3; i++) assert_int_equal(get32(idx + OFF_LEN + 4 * i), len[i]);
    for (int i = 0; i < 3; i++) assert_int_equal(get64(idx + OFF_PTR + 8 * i), ptr[i]);
    for (int i = 0; i < 4; i++) assert_int_equal(get64(idx + OFF_DOC + 8 * i), doc[i]);
    free(idx);
    snprintf(path, sizeof(path), "%s.bin", p);
    uint8_t *bin = slurp(path, &n);
    assert_int_equal(n, SMALL_BIN);
    for (int i = 0; i < 9; i++) assert_int_equal(bin[2 * i] | bin[2 * i + 1] << 8, i + 1);
    free(bin);
    assert_int_equal(count_entries(dir), 2);
}

/* ---- (4) corrupt and truncated files ---- */

typedef struct {
    char dir[600];
    uint8_t good_idx[SMALL_IDX], good_bin[SMALL_BIN];
    uint8_t idx[SMALL_IDX + 16], bin[SMALL_BIN + 16];
    int cases;
} corrupt_t;

static void fresh(corrupt_t *c)
{
    memcpy(c->idx, c->good_idx, SMALL_IDX);
    memcpy(c->bin, c->good_bin, SMALL_BIN);
}

/* Writes idx/bin (n < 0: no such file) as g_tmp/corrupt/<name>, opens it, and expects -1 with
 * one line naming <name>.<ext> by its full path and saying `what`. */
static void expect_bad(corrupt_t *c, const char *name, long idx_n, long bin_n, bool multimodal,
                       const char *ext, const char *what)
{
    char prefix[700], path[800], err[1024] = "";
    snprintf(prefix, sizeof(prefix), "%s/%s", c->dir, name);
    snprintf(path, sizeof(path), "%s.idx", prefix);
    if (idx_n >= 0) spit(path, c->idx, (size_t)idx_n);
    snprintf(path, sizeof(path), "%s.bin", prefix);
    if (bin_n >= 0) spit(path, c->bin, (size_t)bin_n);
    mc_indexed_t d;
    memset(&d, 0x5a, sizeof(d));
    if (mc_indexed_open(&d, prefix, multimodal, err, sizeof(err)) == 0) {
        mc_indexed_close(&d);
        fail_msg("%s: corrupt dataset accepted", name);
    }
    assert_null(d.idx_map); /* a failed open leaves nothing to close */
    assert_null(d.bin);
    snprintf(path, sizeof(path), "%s.%s", prefix, ext);
    assert_one_line(err, path, what);
    c->cases++;
}

static void test_corrupt_files(void **state)
{
    (void)state;
    corrupt_t *c = calloc(1, sizeof(*c));
    char p[700], path[800];
    subdir(c->dir, sizeof(c->dir), "corrupt");
    snprintf(p, sizeof(p), "%s/good", c->dir);
    write_small(p);
    size_t n;
    snprintf(path, sizeof(path), "%s.idx", p);
    uint8_t *b = slurp(path, &n);
    assert_int_equal(n, SMALL_IDX);
    memcpy(c->good_idx, b, n);
    free(b);
    snprintf(path, sizeof(path), "%s.bin", p);
    b = slurp(path, &n);
    assert_int_equal(n, SMALL_BIN);
    memcpy(c->good_bin, b, n);
    free(b);

    const long I = SMALL_IDX, B = SMALL_BIN;
    fresh(c); c->idx[0] = 'X';
    expect_bad(c, "magic", I, B, false, "idx", "bad magic");
    fresh(c); memcpy(c->idx, "TNTIDX\0\0", 8);
    expect_bad(c, "legacy", I, B, false, "idx", "TNTIDX");
    fresh(c); put64(c->idx + 9, 2);
    expect_bad(c, "version2", I, B, false, "idx", "version 2");
    fresh(c); c->idx[17] = 0;
    expect_bad(c, "dtype0", I, B, false, "idx", "dtype code 0");
    fresh(c); c->idx[17] = 9;
    expect_bad(c, "dtype9", I, B, false, "idx", "dtype code 9");

    const long cuts[] = {0, 5, 9, 20, 33, 34, 45, 60, 70, 101};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        char name[32];
        snprintf(name, sizeof(name), "cut%ld", cuts[i]);
        fresh(c);
        expect_bad(c, name, cuts[i], B, false, "idx", "truncated");
    }
    fresh(c); c->idx[I] = 0;
    expect_bad(c, "trailing1", I + 1, B, false, "idx", "1 trailing bytes");
    fresh(c); memset(c->idx + I, 0, 3); /* the size a multimodal index (3 modes) would have */
    expect_bad(c, "trailing_modes", I + 3, B, false, "idx", "multimodal");
    fresh(c);
    expect_bad(c, "as_multimodal", I, B, true, "idx", "truncated");

    fresh(c); put64(c->idx + 18, 4);
    expect_bad(c, "S4", I, B, false, "idx", "truncated");
    /* 12 * (2^62 + 3) wraps to 36: with wrapping arithmetic the size would match exactly */
    fresh(c); put64(c->idx + 18, (UINT64_C(1) << 62) + 3);
    expect_bad(c, "S_wraps", I, B, false, "idx", "impossibly many");
    fresh(c); put64(c->idx + 26, (UINT64_C(1) << 61) + 4); /* 8D wraps to 32 */
    expect_bad(c, "D_wraps", I, B, false, "idx", "impossibly many");
    fresh(c); put64(c->idx + 18, UINT64_MAX);
    expect_bad(c, "S_max", I, B, false, "idx", "impossibly many");
    fresh(c); put64(c->idx + 26, 0);
    expect_bad(c, "D0", I, B, false, "idx", "document count is 0");

    fresh(c); put32(c->idx + OFF_LEN + 4, (uint32_t)-1);
    expect_bad(c, "neglen", I, B, false, "idx", "negative length -1");
    fresh(c); put32(c->idx + OFF_LEN + 8, 5);
    expect_bad(c, "longlen", I, B, false, "bin",
               "sequence 2 (10 bytes at byte offset 10) lies outside");
    fresh(c); put32(c->idx + OFF_LEN + 8, INT32_MAX);
    expect_bad(c, "maxlen", I, B, false, "bin", "sequence 2 (");
    fresh(c); put64(c->idx + OFF_PTR + 16, 100);
    expect_bad(c, "ptr_past_end", I, B, false, "bin", "sequence 2 (8 bytes at byte offset 100)");
    fresh(c); put64(c->idx + OFF_PTR + 16, 12);
    expect_bad(c, "ptr_overhang", I, B, false, "bin", "(8 bytes at byte offset 12)");
    fresh(c); put64(c->idx + OFF_PTR + 8, (uint64_t)-2);
    expect_bad(c, "ptr_negative", I, B, false, "bin", "sequence 1 (4 bytes at byte offset -2)");
    fresh(c); put64(c->idx + OFF_PTR, INT64_MAX);
    expect_bad(c, "ptr_max", I, B, false, "bin",
               "sequence 0 (6 bytes at byte offset 9223372036854775807)");

    fresh(c); put64(c->idx + OFF_DOC, 1);
    expect_bad(c, "doc_start", I, B, false, "idx", "document_indices[0] is 1");
    fresh(c); put64(c->idx + OFF_DOC + 16, 1);
    expect_bad(c, "doc_decrease", I, B, false, "idx", "decrease at 2");
    fresh(c); put64(c->idx + OFF_DOC + 24, 2);
    expect_bad(c, "doc_last", I, B, false, "idx", "end at 2");
    fresh(c); put64(c->idx + OFF_DOC + 24, 4);
    expect_bad(c, "doc_beyond", I, B, false, "idx", "end at 4");

    fresh(c);
    expect_bad(c, "bin_short", I, B - 1, false, "bin", "sequence 2 (");
    expect_bad(c, "bin_empty", I, 0, false, "bin", "lies outside the file's 0 bytes");
    expect_bad(c, "bin_missing", I, -1, false, "bin", "cannot open");
    expect_bad(c, "idx_missing", -1, B, false, "idx", "cannot open");
    snprintf(path, sizeof(path), "%s/isdir.idx", c->dir);
    assert_int_equal(mkdir(path, 0777), 0);
    expect_bad(c, "isdir", -1, B, false, "idx", "not a regular file");
    print_message("%d corrupt datasets rejected\n", c->cases);
    assert_true(c->cases >= 20);
    free(c);
}

/* A relative prefix is named by its full path in errors. */
static void test_error_names_full_path(void **state)
{
    (void)state;
    char cwd[4096], want[4200], err[5000] = "";
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    snprintf(want, sizeof(want), "%s/no_such_dir_mc_indexed/x.idx: cannot open", cwd);
    mc_indexed_t d;
    assert_int_equal(mc_indexed_open(&d, "no_such_dir_mc_indexed/x", false, err, sizeof(err)), -1);
    assert_ptr_equal(strstr(err, want), err);
    /* no err buffer: still -1, no crash */
    assert_int_equal(mc_indexed_open(&d, "no_such_dir_mc_indexed/x", false, NULL, 0), -1);
}

/* Valid files the reader must accept: empty datasets, Megatron-lenient pointers, modes. */
static void test_valid_edge_cases(void **state)
{
    (void)state;
    char dir[600], p[700], path[800], err[512] = "";
    subdir(dir, sizeof(dir), "valid");
    mc_indexed_t d;
    int32_t out[8];

    snprintf(p, sizeof(p), "%s/empty", dir); /* S = 0, D = 1, empty .bin */
    mc_indexed_writer_t *w = mc_indexed_writer_open(p, MC_DTYPE_UINT16, err, sizeof(err));
    finish(w);
    open_ok(&d, p, false);
    assert_int_equal(d.num_sequences, 0);
    assert_int_equal(d.num_documents, 0);
    assert_int_equal(d.bin_size, 0);
    assert_int_equal(d.idx_size, 42);
    assert_int_equal(mc_indexed_get(&d, 0, 0, 0, out, err, sizeof(err)), -1);
    mc_indexed_close(&d);
    mc_indexed_close(&d); /* closing twice is harmless */

    snprintf(p, sizeof(p), "%s/empty_docs", dir); /* three empty documents */
    w = mc_indexed_writer_open(p, MC_DTYPE_INT32, err, sizeof(err));
    add(w, NULL, NULL, 0); add(w, NULL, NULL, 0); add(w, NULL, NULL, 0);
    finish(w);
    open_ok(&d, p, false);
    assert_int_equal(d.num_sequences, 0);
    assert_int_equal(d.num_documents, 3);
    mc_indexed_close(&d);

    /* Overlapping pointers inside the .bin: Megatron's reader accepts them, and so do we. */
    snprintf(p, sizeof(p), "%s/overlap", dir);
    write_small(p);
    snprintf(path, sizeof(path), "%s.idx", p);
    size_t n;
    uint8_t *idx = slurp(path, &n);
    put64(idx + OFF_PTR + 16, 0);
    spit(path, idx, n);
    open_ok(&d, p, false);
    get_ok(&d, 2, 0, 4, out);
    const int32_t first4[] = {1, 2, 3, 4};
    assert_memory_equal(out, first4, sizeof(first4));
    mc_indexed_close(&d);

    /* A multimodal index: sequence_modes after document_indices. */
    snprintf(p, sizeof(p), "%s/modes", dir);
    write_small(p);
    uint8_t mm[SMALL_IDX + 3];
    memcpy(mm, idx, SMALL_IDX);
    put64(mm + OFF_PTR + 16, 10);
    mm[SMALL_IDX] = 0; mm[SMALL_IDX + 1] = 1; mm[SMALL_IDX + 2] = 0;
    snprintf(path, sizeof(path), "%s.idx", p);
    spit(path, mm, sizeof(mm));
    open_ok(&d, p, true);
    assert_non_null(d.sequence_modes);
    assert_int_equal(d.sequence_modes[1], 1);
    assert_int_equal(d.sequence_modes[2], 0);
    get_ok(&d, 2, 0, 4, out);
    const int32_t last4[] = {6, 7, 8, 9};
    assert_memory_equal(out, last4, sizeof(last4));
    mc_indexed_close(&d);
    free(idx);
}

/* ---- (5) get(): bounds and dtype conversions ---- */

static void test_get_bounds(void **state)
{
    (void)state;
    char dir[600], p[700], err[512];
    subdir(dir, sizeof(dir), "bounds");
    snprintf(p, sizeof(p), "%s/s", dir);
    write_small(p);
    mc_indexed_t d;
    open_ok(&d, p, false);
    int32_t out[8] = {0};
    get_ok(&d, 0, 1, 2, out);
    assert_int_equal(out[0], 2);
    assert_int_equal(out[1], 3);
    get_ok(&d, 1, 0, 2, out);
    assert_int_equal(out[0], 4);
    assert_int_equal(out[1], 5);
    get_ok(&d, 0, 3, 0, out); /* empty range at the end */
    const struct { int64_t seq, off, len; } bad[] = {
        {-1, 0, 1}, {3, 0, 1}, {INT64_MAX, 0, 1}, {0, -1, 1}, {0, 0, -1}, {0, 2, 2},
        {0, 4, 0}, {0, 0, 4}, {2, 1, INT64_MAX}, {2, INT64_MAX, 1},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = 0;
        if (mc_indexed_get(&d, bad[i].seq, bad[i].off, bad[i].len, out, err, sizeof(err)) != -1)
            fail_msg("get(%lld, %lld, %lld) accepted", (long long)bad[i].seq,
                     (long long)bad[i].off, (long long)bad[i].len);
        assert_one_line(err, p, "out of range");
    }
    mc_indexed_close(&d);
}

/* Writes one document of `n` tokens in `dtype`, checks the .bin bytes, reads it back. */
static void roundtrip(const char *dir, int dtype, const int32_t *t, int n)
{
    char p[700], path[800], err[512] = "";
    snprintf(p, sizeof(p), "%s/%s", dir, mc_indexed_dtype_name(dtype));
    mc_indexed_writer_t *w = mc_indexed_writer_open(p, dtype, err, sizeof(err));
    if (!w) fail_msg("%s", err);
    add(w, t, &n, 1);
    finish(w);
    size_t nb;
    snprintf(path, sizeof(path), "%s.bin", p);
    uint8_t *bin = slurp(path, &nb);
    int size = mc_indexed_dtype_size(dtype);
    assert_int_equal(nb, (size_t)(n * size));
    for (int i = 0; i < n; i++) { /* little-endian, sign-extended for int64 */
        int64_t v = t[i];
        for (int k = 0; k < size; k++) assert_int_equal(bin[i * size + k], (uint8_t)(v >> 8 * k));
    }
    free(bin);
    mc_indexed_t d;
    open_ok(&d, p, false);
    assert_int_equal(d.dtype, dtype);
    int32_t out[16];
    get_ok(&d, 0, 0, n, out);
    assert_memory_equal(out, t, (size_t)n * sizeof(*t));
    get_ok(&d, 0, 1, n - 2, out); /* an offset into the sequence */
    assert_memory_equal(out, t + 1, (size_t)(n - 2) * sizeof(*t));
    mc_indexed_close(&d);
}

static void test_dtype_conversions(void **state)
{
    (void)state;
    char dir[600];
    subdir(dir, sizeof(dir), "dtypes");
    const int32_t u8[] = {0, 1, 127, 128, 255};
    const int32_t i8[] = {-128, -1, 0, 1, 127};
    const int32_t i16[] = {-32768, -1, 0, 300, 32767};
    const int32_t u16[] = {0, 255, 256, 50256, 65535};
    const int32_t i32[] = {INT32_MIN, -1, 0, 65536, INT32_MAX};
    roundtrip(dir, MC_DTYPE_UINT8, u8, 5);
    roundtrip(dir, MC_DTYPE_INT8, i8, 5);
    roundtrip(dir, MC_DTYPE_INT16, i16, 5);
    roundtrip(dir, MC_DTYPE_UINT16, u16, 5);
    roundtrip(dir, MC_DTYPE_INT32, i32, 5);
    roundtrip(dir, MC_DTYPE_INT64, i32, 5);
}

/* int64 values outside int32, and float dtypes, cannot be read as tokens. */
static void test_unreadable_tokens(void **state)
{
    (void)state;
    char dir[600], p[700], path[800], err[512] = "";
    subdir(dir, sizeof(dir), "unreadable");
    const int32_t t[] = {7, 8, 9};
    const int32_t len = 3;
    mc_indexed_t d;
    int32_t out[3];

    snprintf(p, sizeof(p), "%s/big", dir);
    mc_indexed_writer_t *w = mc_indexed_writer_open(p, MC_DTYPE_INT64, err, sizeof(err));
    add(w, t, &len, 1);
    finish(w);
    snprintf(path, sizeof(path), "%s.bin", p);
    size_t n;
    uint8_t *bin = slurp(path, &n);
    put64(bin + 8, (uint64_t)1 << 40);
    spit(path, bin, n);
    free(bin);
    open_ok(&d, p, false);
    get_ok(&d, 0, 0, 1, out);
    assert_int_equal(out[0], 7);
    get_ok(&d, 0, 2, 1, out);
    assert_int_equal(out[0], 9);
    assert_int_equal(mc_indexed_get(&d, 0, 0, 3, out, err, sizeof(err)), -1);
    assert_one_line(err, p, "token 1099511627776 at position 1");
    mc_indexed_close(&d);

    const struct { int from, to; const char *name; } f[] = {
        {MC_DTYPE_INT32, MC_DTYPE_FLOAT32, "float32"},
        {MC_DTYPE_INT64, MC_DTYPE_FLOAT64, "float64"},
    };
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, f[i].name);
        w = mc_indexed_writer_open(p, f[i].from, err, sizeof(err));
        add(w, t, &len, 1);
        finish(w);
        snprintf(path, sizeof(path), "%s.idx", p);
        uint8_t *idx = slurp(path, &n);
        idx[17] = (uint8_t)f[i].to;
        spit(path, idx, n);
        free(idx);
        open_ok(&d, p, false); /* a valid dataset, just not of tokens */
        assert_int_equal(d.dtype, f[i].to);
        assert_int_equal(mc_indexed_get(&d, 0, 0, 1, out, err, sizeof(err)), -1);
        assert_one_line(err, p, f[i].name);
        mc_indexed_close(&d);
    }
}

/* ---- (6) writer errors leave nothing behind ---- */

static void test_writer_value_errors(void **state)
{
    (void)state;
    char dir[600], p[700], err[512] = "";
    subdir(dir, sizeof(dir), "werr");
    snprintf(p, sizeof(p), "%s/w", dir);
    const struct { int dtype; int32_t v; const char *text; } bad[] = {
        {MC_DTYPE_UINT16, 70000, "70000"}, {MC_DTYPE_UINT16, -1, "-1"},
        {MC_DTYPE_UINT8, 256, "256"},      {MC_DTYPE_UINT8, -1, "-1"},
        {MC_DTYPE_INT8, 128, "128"},       {MC_DTYPE_INT8, -129, "-129"},
        {MC_DTYPE_INT16, 32768, "32768"},  {MC_DTYPE_INT16, -32769, "-32769"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        mc_indexed_writer_t *w = mc_indexed_writer_open(p, bad[i].dtype, err, sizeof(err));
        assert_non_null(w);
        const int32_t t[] = {1, bad[i].v}, len = 2;
        err[0] = 0;
        assert_int_equal(mc_indexed_writer_add_document(w, t, &len, 1, err, sizeof(err)), -1);
        assert_one_line(err, p, bad[i].text);
        assert_non_null(strstr(err, mc_indexed_dtype_name(bad[i].dtype)));
        mc_indexed_writer_abort(w);
        assert_int_equal(count_entries(dir), 0);
    }

    /* A rejected document is not written at all; the writer goes on. */
    mc_indexed_writer_t *w = mc_indexed_writer_open(p, MC_DTYPE_UINT16, err, sizeof(err));
    const int32_t good[] = {1, 2}, badv[] = {3, 70000}, len2 = 2, neg[] = {1, -1};
    add(w, good, &len2, 1);
    assert_int_equal(mc_indexed_writer_add_document(w, badv, &len2, 1, err, sizeof(err)), -1);
    assert_int_equal(mc_indexed_writer_add_document(w, good, neg, 2, err, sizeof(err)), -1);
    assert_one_line(err, p, "negative length -1");
    assert_int_equal(mc_indexed_writer_add_document(w, NULL, &len2, 1, err, sizeof(err)), -1);
    assert_int_equal(mc_indexed_writer_add_document(w, good, NULL, -1, err, sizeof(err)), -1);
    add(w, good, &len2, 1);
    finish(w);
    mc_indexed_t d;
    open_ok(&d, p, false);
    assert_int_equal(d.num_sequences, 2);
    assert_int_equal(d.num_documents, 2);
    assert_int_equal(d.bin_size, 8);
    mc_indexed_close(&d);
    assert_int_equal(count_entries(dir), 2);

    /* Float and invalid dtypes are refused at open, creating nothing. */
    snprintf(p, sizeof(p), "%s/f", dir);
    const int dts[] = {0, 6, 7, 9};
    for (int i = 0; i < 4; i++) {
        assert_null(mc_indexed_writer_open(p, dts[i], err, sizeof(err)));
        assert_one_line(err, p, "not a token dtype");
    }
    assert_int_equal(count_entries(dir), 2);
}

static void test_writer_abort_and_failures(void **state)
{
    (void)state;
    char dir[600], p[700], path[800], err[512] = "";
    subdir(dir, sizeof(dir), "wfail");
    snprintf(p, sizeof(p), "%s/w", dir);
    const int32_t t[] = {1, 2, 3}, len = 3;

    /* abort after writing: no final files, no temporaries */
    mc_indexed_writer_t *w = mc_indexed_writer_open(p, MC_DTYPE_UINT16, err, sizeof(err));
    add(w, t, &len, 1);
    snprintf(path, sizeof(path), "%s.bin.tmp", p);
    assert_int_equal(access(path, F_OK), 0); /* written under the temporary name */
    snprintf(path, sizeof(path), "%s.bin", p);
    assert_int_equal(access(path, F_OK), -1);
    mc_indexed_writer_abort(w);
    mc_indexed_writer_abort(NULL);
    assert_int_equal(count_entries(dir), 0);

    /* a directory that does not exist */
    snprintf(path, sizeof(path), "%s/no/such/dir/w", dir);
    assert_null(mc_indexed_writer_open(path, MC_DTYPE_UINT16, err, sizeof(err)));
    assert_one_line(err, "no/such/dir/w.bin.tmp", "cannot create");

    /* finish cannot create the .idx.tmp: everything removed, the error is returned */
    snprintf(path, sizeof(path), "%s.idx.tmp", p);
    assert_int_equal(mkdir(path, 0777), 0);
    w = mc_indexed_writer_open(p, MC_DTYPE_UINT16, err, sizeof(err));
    add(w, t, &len, 1);
    assert_int_equal(mc_indexed_writer_finish(w, err, sizeof(err)), -1);
    assert_one_line(err, "w.idx.tmp", "cannot create");
    assert_int_equal(rmdir(path), 0);
    assert_int_equal(count_entries(dir), 0);

    /* the final .idx cannot be replaced (a non-empty directory): no .bin is published */
    snprintf(path, sizeof(path), "%s.idx", p);
    assert_int_equal(mkdir(path, 0777), 0);
    char inner[900];
    snprintf(inner, sizeof(inner), "%s/x", path);
    spit(inner, (const uint8_t *)"x", 1);
    w = mc_indexed_writer_open(p, MC_DTYPE_UINT16, err, sizeof(err));
    add(w, t, &len, 1);
    assert_int_equal(mc_indexed_writer_finish(w, err, sizeof(err)), -1);
    assert_one_line(err, "w.idx", NULL);
    assert_int_equal(count_entries(dir), 1); /* only the directory we made */
    unlink(inner);
    assert_int_equal(rmdir(path), 0);

    /* replacing an existing dataset */
    w = mc_indexed_writer_open(p, MC_DTYPE_UINT16, err, sizeof(err));
    add(w, t, &len, 1);
    finish(w);
    w = mc_indexed_writer_open(p, MC_DTYPE_UINT16, err, sizeof(err));
    add(w, t + 1, (const int32_t[]){2}, 1);
    add(w, t, (const int32_t[]){1}, 1);
    finish(w);
    assert_int_equal(count_entries(dir), 2);
    mc_indexed_t d;
    open_ok(&d, p, false);
    assert_int_equal(d.num_documents, 2);
    int32_t out[2];
    get_ok(&d, 0, 0, 2, out);
    assert_int_equal(out[0], 2);
    assert_int_equal(out[1], 3);
    mc_indexed_close(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_optimal_dtype_and_sizes),
        cmocka_unit_test(test_reference_read),
        cmocka_unit_test(test_reference_write),
        cmocka_unit_test(test_reference_add_index_halves),
        cmocka_unit_test(test_add_index_synthetic),
        cmocka_unit_test(test_add_index_refuses_gaps),
        cmocka_unit_test(test_small_layout),
        cmocka_unit_test(test_corrupt_files),
        cmocka_unit_test(test_error_names_full_path),
        cmocka_unit_test(test_valid_edge_cases),
        cmocka_unit_test(test_get_bounds),
        cmocka_unit_test(test_dtype_conversions),
        cmocka_unit_test(test_unreadable_tokens),
        cmocka_unit_test(test_writer_value_errors),
        cmocka_unit_test(test_writer_abort_and_failures),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
