/* `megatron-c preprocess-data`: reader thread -> worker threads -> in-order writer (see
 * preprocess.h for what it does and where it differs from Megatron's script). The workers' part
 * is preprocess_encode.c, the files preprocess_files.c, the fast JSON scanner json_scan.c. */
#include "data/preprocess.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/clock.h"
#include "base/error.h"
#include "base/py_float.h"
#include "data/indexed.h"
#include "data/preprocess_pipe.h"
#include "data/tokenizer.h"

/* ---- chunks ---- */

void mc_prep_fail(mc_prep_pipe_t *p, const char *fmt, ...)
{
    pthread_mutex_lock(&p->mu);
    if (!p->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err, sizeof(p->err), fmt, ap);
        va_end(ap);
        p->failed = true;
    }
    p->stop = true;
    pthread_cond_broadcast(&p->cv_free);
    pthread_cond_broadcast(&p->cv_work);
    pthread_cond_broadcast(&p->cv_done);
    pthread_mutex_unlock(&p->mu);
}

static void pipe_stop(mc_prep_pipe_t *p)
{
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv_free);
    pthread_cond_broadcast(&p->cv_work);
    pthread_cond_broadcast(&p->cv_done);
    pthread_mutex_unlock(&p->mu);
}

bool mc_prep_grow(void **ptr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*ptr, c * elem);
    if (!q) return false;
    *ptr = q;
    *cap = c;
    return true;
}

static void chunk_free(mc_prep_chunk_t *c, int keys)
{
    free(c->text);
    free(c->line_off);
    if (c->tokens)
        for (int k = 0; k < keys; k++) mc_ids_free(&c->tokens[k]);
    if (c->lens)
        for (int k = 0; k < keys; k++) mc_ids_free(&c->lens[k]);
    free(c->tokens);
    free(c->lens);
    free(c->nseq);
    free(c->bad);
}

/* Room for one more line in the per-line arrays (reader side). */
static bool chunk_reserve_line(mc_prep_chunk_t *c, int keys)
{
    if (c->n_lines + 1 < c->lines_cap) return true;
    int cap = c->lines_cap ? c->lines_cap * 2 : 256;
    size_t *off = realloc(c->line_off, (size_t)(cap + 1) * sizeof(*off));
    if (!off) return false;
    c->line_off = off;
    int32_t *nseq = realloc(c->nseq, (size_t)cap * (size_t)keys * sizeof(*nseq));
    if (!nseq) return false;
    c->nseq = nseq;
    unsigned char *bad = realloc(c->bad, (size_t)cap);
    if (!bad) return false;
    c->bad = bad;
    c->lines_cap = cap;
    return true;
}


/* ---- reader ---- */

typedef struct {
    mc_prep_pipe_t *p;
    char *rbuf;
} reader_t;

/* Waits for the next free slot; NULL when the pipeline is stopping. */
static mc_prep_chunk_t *acquire_slot(mc_prep_pipe_t *p, int file, int64_t first_line,
                                     int64_t first_global)
{
    pthread_mutex_lock(&p->mu);
    mc_prep_chunk_t *c = &p->slots[p->produced % p->n_slots];
    while (!p->stop && c->state != SLOT_FREE) pthread_cond_wait(&p->cv_free, &p->mu);
    bool stop = p->stop;
    pthread_mutex_unlock(&p->mu);
    if (stop) return NULL;
    c->text_len = 0;
    c->n_lines = 0;
    /* text is never NULL, even in a chunk of blank lines (memcpy of 0 bytes, text + 0) */
    if (!chunk_reserve_line(c, p->keys) || !mc_prep_grow((void **)&c->text, &c->text_cap, 1, 1)) {
        mc_prep_fail(p, "out of memory reading the input");
        return NULL;
    }
    c->line_off[0] = 0;
    c->file = file;
    c->first_line = first_line;
    c->first_global = first_global;
    return c;
}

static void submit_slot(mc_prep_pipe_t *p, mc_prep_chunk_t *c)
{
    pthread_mutex_lock(&p->mu);
    c->seq = p->produced++;
    c->state = SLOT_FILLED;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
}

/* Reads one file into chunks. Returns the number of lines, or -1 (pipeline stopping). */
static int64_t read_file(reader_t *r, int file, int64_t global)
{
    mc_prep_pipe_t *p = r->p;
    const char *path = p->files[file];
    gzFile gz = gzopen(path, "rb");
    if (!gz) {
        mc_prep_fail(p, "cannot open --input %s: %s", path,
                     errno ? strerror(errno) : "out of memory");
        return -1;
    }
    gzbuffer(gz, READ_BYTES);
    printf("Opening %s\n", path);
    fflush(stdout);

    int64_t line = 0; /* lines completed in this file */
    mc_prep_chunk_t *c = NULL;
    bool partial = false; /* the chunk's last line has no '\n' yet */
    int64_t result = -1;
    for (;;) {
        int n = gzread(gz, r->rbuf, READ_BYTES);
        if (n <= 0) {
            int errnum;
            gzerror(gz, &errnum);
            if (n < 0 || (errnum != Z_OK && errnum != Z_STREAM_END)) {
                mc_prep_fail(p, "reading --input %s: %s", path, mc_prep_gz_message(gz, path));
                goto out;
            }
            break;
        }
        pthread_mutex_lock(&p->mu);
        bool stop = p->stop;
        pthread_mutex_unlock(&p->mu);
        if (stop) goto out;
        const char *b = r->rbuf, *end = r->rbuf + n;
        while (b < end) {
            if (!c) {
                c = acquire_slot(p, file, line + 1, global + line);
                if (!c) goto out;
            }
            const char *nl = memchr(b, '\n', (size_t)(end - b));
            size_t len = (size_t)((nl ? nl : end) - b);
            if (!mc_prep_grow((void **)&c->text, &c->text_cap, c->text_len + len, 1)) {
                mc_prep_fail(p, "out of memory reading --input %s", path);
                goto out;
            }
            memcpy(c->text + c->text_len, b, len);
            c->text_len += len;
            b += len;
            if (!nl) {
                partial = true;
                break;
            }
            b++; /* the '\n' */
            partial = false;
            if (!chunk_reserve_line(c, p->keys)) {
                mc_prep_fail(p, "out of memory reading --input %s", path);
                goto out;
            }
            c->line_off[++c->n_lines] = c->text_len;
            line++;
            if (c->text_len >= CHUNK_BYTES || c->n_lines >= CHUNK_LINES) {
                submit_slot(p, c);
                c = NULL;
            }
        }
    }
    if (partial) { /* a last line without '\n' is a line too */
        if (!chunk_reserve_line(c, p->keys)) {
            mc_prep_fail(p, "out of memory reading --input %s", path);
            goto out;
        }
        c->line_off[++c->n_lines] = c->text_len;
        line++;
    }
    if (c && c->n_lines > 0) submit_slot(p, c);
    c = NULL;
    result = line;
out:
    if (c) { /* not submitted: give the slot back untouched (state is still FREE) */
        c->n_lines = 0;
    }
    gzclose(gz);
    return result;
}

static void *reader_main(void *arg)
{
    reader_t *r = arg;
    mc_prep_pipe_t *p = r->p;
    int64_t global = 0;
    for (int f = 0; f < p->n_files; f++) {
        int64_t n = read_file(r, f, global);
        if (n < 0) break;
        global += n;
    }
    pthread_mutex_lock(&p->mu);
    p->eof = true;
    pthread_cond_broadcast(&p->cv_work);
    pthread_cond_broadcast(&p->cv_done);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void *worker_main(void *arg)
{
    mc_prep_pipe_t *p = arg;
    /* vals[keys], then two size_t marks per key (encode_chunk) */
    mc_prep_scratch_t sc = {NULL, 0,
                            malloc((size_t)p->keys * (sizeof(mc_json_val_t) + 2 * sizeof(size_t)))};
    if (!sc.vals) {
        mc_prep_fail(p, "out of memory");
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->stop && p->next_work >= p->produced && !p->eof)
            pthread_cond_wait(&p->cv_work, &p->mu);
        if (p->stop || p->next_work >= p->produced) {
            pthread_mutex_unlock(&p->mu);
            break;
        }
        mc_prep_chunk_t *c = &p->slots[p->next_work++ % p->n_slots];
        pthread_mutex_unlock(&p->mu);

        mc_prep_encode_chunk(p, c, &sc);

        pthread_mutex_lock(&p->mu);
        c->state = SLOT_DONE;
        pthread_cond_broadcast(&p->cv_done);
        pthread_mutex_unlock(&p->mu);
    }
    free(sc.buf);
    free(sc.vals);
    return NULL;
}

/* ---- the run ---- */

typedef struct {
    int64_t docs, tokens, skipped, bytes;
    char first_skipped[ERR_LEN];
} stats_t;

static void progress(const mc_preprocess_args_t *a, int64_t docs, int64_t bytes, double t0)
{
    if (docs % a->log_interval != 0) return;
    double elapsed = mc_now_s() - t0;
    if (elapsed <= 0) elapsed = 1e-9;
    char r1[40], r2[40];
    mc_py_float_repr((double)docs / elapsed, r1, sizeof(r1));
    mc_py_float_repr((double)bytes / elapsed / 1024 / 1024, r2, sizeof(r2));
    fprintf(stderr, "Processed %lld documents (%s docs/s, %s MB/s).\n", (long long)docs, r1, r2);
}

/* Writes one finished chunk in order. Returns false when the run must stop (error or
 * --max-documents reached). */
static bool write_chunk(mc_prep_pipe_t *p, mc_prep_chunk_t *c, mc_prep_out_t *outs,
                        int64_t partition_size, stats_t *st, double t0)
{
    const mc_preprocess_args_t *a = p->a;
    size_t toff[64], loff[64];
    size_t *to = toff, *lo = loff;
    size_t *heap = NULL;
    if (p->keys > 64) {
        heap = calloc(2 * (size_t)p->keys, sizeof(*heap));
        if (!heap) {
            mc_prep_fail(p, "out of memory");
            return false;
        }
        to = heap;
        lo = heap + p->keys;
    } else {
        memset(toff, 0, sizeof(toff));
        memset(loff, 0, sizeof(loff));
    }
    bool go_on = true;
    for (int i = 0; i < c->n_lines; i++) {
        if (a->max_documents >= 0 && st->docs >= a->max_documents) {
            go_on = false;
            break;
        }
        if (c->bad[i]) {
            if (!a->skip_malformed) {
                mc_prep_fail(p, "%s (fix the line, or pass --skip-malformed to skip such lines)",
                             c->bad_msg);
                go_on = false;
                break;
            }
            if (st->skipped++ == 0) snprintf(st->first_skipped, ERR_LEN, "%s", c->bad_msg);
            /* later bad lines of this chunk: their messages are not kept, the count is */
            continue;
        }
        int64_t g = c->first_global + i;
        int part = 0;
        if (a->partitions > 1) {
            part =
                a->keep_sequential_samples ? (int)(g / partition_size) : (int)(g % a->partitions);
            if (part >= a->partitions) part = a->partitions - 1;
        }
        for (int k = 0; k < p->keys; k++) {
            int32_t ns = c->nseq[(size_t)k * (size_t)c->lines_cap + (size_t)i];
            const int32_t *lens = c->lens[k].v + lo[k];
            int64_t ntok = 0;
            for (int32_t s = 0; s < ns; s++) ntok += lens[s];
            char err[512] = "";
            mc_prep_out_t *o = &outs[(size_t)part * (size_t)p->keys + (size_t)k];
            if (mc_indexed_writer_add_document(o->w, c->tokens[k].v + to[k], lens, ns, err,
                                               sizeof(err)) != 0) {
                mc_prep_fail(p, "%s", err);
                go_on = false;
                goto out;
            }
            to[k] += (size_t)ntok;
            lo[k] += (size_t)ns;
            st->tokens += ntok;
        }
        st->docs++;
        st->bytes += (int64_t)(c->line_off[i + 1] - c->line_off[i]) + 1;
        progress(a, st->docs, st->bytes, t0);
    }
out:
    free(heap);
    return go_on;
}

/* Per-partition and per-key outputs (partitions > 1), or per key (outs are the finals). */
typedef struct {
    int keys, parts, dtype;
    size_t n_outs;
    mc_prep_out_t *outs;   /* [parts * keys] */
    mc_prep_out_t *finals; /* [keys] */
} outputs_t;

/* Lines per partition with --keep-sequential-samples (1 otherwise). */
static int64_t partition_size(const mc_preprocess_args_t *a, char **files, int n_files)
{
    if (a->partitions <= 1 || !a->keep_sequential_samples) return 1;
    char *buf = malloc(READ_BYTES);
    if (!buf) mc_fatal("out of memory");
    int64_t total = 0;
    for (int f = 0; f < n_files; f++) total += mc_prep_count_lines(files[f], buf);
    free(buf);
    int64_t size = (total + a->partitions - 1) / a->partitions;
    return size < 1 ? 1 : size;
}

/* Names every output and opens its writer. False (err set) when one cannot be opened. */
static bool outputs_open(outputs_t *o, const mc_preprocess_args_t *a, int dtype, char *err,
                         size_t n)
{
    int keys = o->keys = a->n_json_keys, parts = o->parts = a->partitions;
    o->dtype = dtype;
    o->n_outs = (size_t)parts * (size_t)keys;
    o->outs = calloc(o->n_outs, sizeof(*o->outs));
    o->finals = calloc((size_t)keys, sizeof(*o->finals));
    if (!o->outs || !o->finals) mc_fatal("out of memory");
    for (int k = 0; k < keys; k++) {
        o->finals[k].prefix = mc_prep_fmt("%s_%s_document", a->output_prefix, a->json_keys[k]);
        for (int i = 0; i < parts; i++)
            o->outs[(size_t)i * keys + k].prefix =
                parts == 1 ? mc_prep_fmt("%s", o->finals[k].prefix)
                           : mc_prep_fmt("%s_%d_%s_document", a->output_prefix, i, a->json_keys[k]);
    }
    for (size_t i = 0; i < o->n_outs; i++) {
        o->outs[i].w = mc_indexed_writer_open(o->outs[i].prefix, dtype, err, n);
        if (!o->outs[i].w) return false;
    }
    return true;
}

/* Merges partition files into key k's final output. False (err set) on failure. */
static bool outputs_merge(outputs_t *o, int k, char *err, size_t n)
{
    mc_prep_out_t *f = &o->finals[k];
    f->w = mc_indexed_writer_open(f->prefix, o->dtype, err, n);
    if (!f->w) return false;
    for (int i = 0; i < o->parts; i++)
        if (mc_indexed_writer_add_index(f->w, o->outs[(size_t)i * o->keys + k].prefix, err, n) != 0)
            return false;
    mc_indexed_writer_t *w = f->w;
    f->w = NULL;
    if (mc_indexed_writer_finish(w, err, n) != 0) return false;
    f->finished = true;
    return true;
}

/* Finishes every writer, then (partitions > 1) merges into the final names. After a failure
 * (failed on entry, or here) nothing is left at any name. Returns whether it all succeeded. */
static bool outputs_finish(outputs_t *o, bool failed, char *err, size_t n)
{
    for (size_t i = 0; i < o->n_outs && !failed; i++) {
        mc_indexed_writer_t *w = o->outs[i].w;
        o->outs[i].w = NULL;
        if (mc_indexed_writer_finish(w, err, n) != 0) failed = true;
        else o->outs[i].finished = true;
    }
    if (o->parts > 1) {
        for (int k = 0; k < o->keys && !failed; k++)
            if (!outputs_merge(o, k, err, n)) failed = true;
        for (size_t i = 0; i < o->n_outs; i++) mc_prep_remove_outputs(&o->outs[i]);
    } else if (!failed) {
        for (int k = 0; k < o->keys; k++) o->finals[k].finished = true; /* same files as outs */
    }
    if (failed) {
        for (size_t i = 0; i < o->n_outs; i++) mc_prep_remove_outputs(&o->outs[i]);
        if (o->parts > 1)
            for (int k = 0; k < o->keys; k++) mc_prep_remove_outputs(&o->finals[k]);
    }
    return !failed;
}

static void outputs_free(outputs_t *o)
{
    for (size_t i = 0; i < o->n_outs; i++) free(o->outs[i].prefix);
    for (int k = 0; k < o->keys; k++) free(o->finals[k].prefix);
    free(o->outs);
    free(o->finals);
}

static void pipe_init(mc_prep_pipe_t *p, const mc_preprocess_args_t *a, const mc_tokenizer_t *tok,
                      char **files, int n_files)
{
    memset(p, 0, sizeof(*p));
    p->a = a;
    p->tok = tok;
    p->eod = mc_tokenizer_eod(tok);
    p->files = files;
    p->n_files = n_files;
    p->keys = a->n_json_keys;
    p->key_len = malloc((size_t)p->keys * sizeof(*p->key_len));
    if (!p->key_len) mc_fatal("out of memory");
    for (int k = 0; k < p->keys; k++) p->key_len[k] = strlen(a->json_keys[k]);
    p->n_slots = 4 * a->workers + 4;
}

static void slots_init(mc_prep_pipe_t *p)
{
    p->slots = calloc((size_t)p->n_slots, sizeof(*p->slots));
    if (!p->slots) mc_fatal("out of memory");
    for (int s = 0; s < p->n_slots; s++) {
        mc_prep_chunk_t *c = &p->slots[s];
        c->tokens = calloc((size_t)p->keys, sizeof(*c->tokens));
        c->lens = calloc((size_t)p->keys, sizeof(*c->lens));
        if (!c->tokens || !c->lens) mc_fatal("out of memory");
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_free, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
}

static void slots_free(mc_prep_pipe_t *p)
{
    for (int s = 0; s < p->n_slots; s++) chunk_free(&p->slots[s], p->keys);
    free(p->slots);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_free);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
}

/* The writer: chunks strictly in input order, until the end, an error or --max-documents. */
static void write_in_order(mc_prep_pipe_t *p, outputs_t *o, int64_t partition_size, stats_t *st,
                           double t0)
{
    for (int64_t next = 0;; next++) {
        pthread_mutex_lock(&p->mu);
        mc_prep_chunk_t *c = &p->slots[next % p->n_slots];
        while (!p->stop && !(c->state == SLOT_DONE && c->seq == next) &&
               !(p->eof && next >= p->produced))
            pthread_cond_wait(&p->cv_done, &p->mu);
        bool ready = !p->stop && c->state == SLOT_DONE && c->seq == next;
        pthread_mutex_unlock(&p->mu);
        if (!ready) break;
        bool go_on = write_chunk(p, c, o->outs, partition_size, st, t0);
        pthread_mutex_lock(&p->mu);
        c->state = SLOT_FREE;
        pthread_cond_broadcast(&p->cv_free);
        pthread_mutex_unlock(&p->mu);
        if (!go_on) {
            pipe_stop(p); /* --max-documents (or an error already recorded) */
            break;
        }
    }
}

/* Runs the reader and worker threads and writes their chunks. False (err set) on an error. */
static bool pipe_run(mc_prep_pipe_t *p, outputs_t *o, int64_t partition_size, stats_t *st,
                     double t0, char *err, size_t n)
{
    int workers = p->a->workers;
    slots_init(p);
    reader_t r = {.p = p, .rbuf = malloc(READ_BYTES)};
    if (!r.rbuf) mc_fatal("out of memory");
    pthread_t reader, *worker = calloc((size_t)workers, sizeof(*worker));
    if (!worker) mc_fatal("out of memory");
    if (pthread_create(&reader, NULL, reader_main, &r) != 0) mc_fatal("cannot start a thread");
    for (int w = 0; w < workers; w++)
        if (pthread_create(&worker[w], NULL, worker_main, p) != 0)
            mc_fatal("cannot start a thread");
    write_in_order(p, o, partition_size, st, t0);
    pthread_join(reader, NULL);
    for (int w = 0; w < workers; w++) pthread_join(worker[w], NULL);
    free(worker);
    free(r.rbuf);
    slots_free(p);
    if (p->failed) snprintf(err, n, "%s", p->err);
    return !p->failed;
}

static void report(const mc_preprocess_args_t *a, const stats_t *st, const outputs_t *o, double t0)
{
    double elapsed = mc_now_s() - t0;
    if (st->skipped > 0)
        mc_warn("skipped %lld malformed line%s (--skip-malformed); the first: %s",
                (long long)st->skipped, st->skipped == 1 ? "" : "s", st->first_skipped);
    printf("Done: %lld documents, %lld tokens, %lld bytes of input in %.3f s "
           "(%.0f tokens/s, %.2f MB/s, %d workers).\n",
           (long long)st->docs, (long long)st->tokens, (long long)st->bytes, elapsed,
           elapsed > 0 ? (double)st->tokens / elapsed : 0.0,
           elapsed > 0 ? (double)st->bytes / elapsed / 1024 / 1024 : 0.0, a->workers);
    for (int k = 0; k < o->keys; k++)
        printf("Wrote %s.bin and %s.idx\n", o->finals[k].prefix, o->finals[k].prefix);
    fflush(stdout);
}

int mc_preprocess_run(const mc_preprocess_args_t *a)
{
    double start = mc_now_s();
    int n_files = 0;
    char **files = mc_prep_input_files(a, &n_files);
    int64_t part_size = partition_size(a, files, n_files);

    char err[ERR_LEN] = "";
    mc_tokenizer_t *tok = mc_tokenizer_build(
        &(mc_tokenizer_spec_t){.type = a->tokenizer_type,
                               .vocab_file = a->vocab_file,
                               .merge_file = a->merge_file,
                               .tokenizer_model = a->tokenizer_model,
                               .vocab_size = a->vocab_size,
                               .vocab_extra_ids = a->vocab_extra_ids,
                               .tiktoken_pattern = a->tiktoken_pattern,
                               .tiktoken_num_special_tokens = a->tiktoken_num_special_tokens,
                               .tiktoken_special_tokens = a->tiktoken_special_tokens,
                               .n_tiktoken_special_tokens = a->n_tiktoken_special_tokens,
                               .legacy = a->legacy_tokenizer},
        err, sizeof(err));
    if (tok && a->append_eod && mc_tokenizer_eod(tok) < 0) {
        snprintf(err, sizeof(err),
                 "--append-eod: the tokenizer has no eod (the model '%s' has no eos piece); "
                 "drop --append-eod or use a model with one",
                 a->tokenizer_model ? a->tokenizer_model : "");
        mc_tokenizer_free(tok);
        tok = NULL;
    }
    if (!tok) {
        mc_prep_free_files(files, n_files);
        mc_user_error("%s", err[0] ? err : "cannot build the tokenizer");
    }
    printf("Processing data with %d workers.\n", a->workers);
    fflush(stdout);

    outputs_t o;
    int dtype = mc_indexed_optimal_dtype(mc_tokenizer_vocab_size(tok));
    bool ok = outputs_open(&o, a, dtype, err, sizeof(err));
    mc_prep_pipe_t p;
    pipe_init(&p, a, tok, files, n_files);
    stats_t st;
    memset(&st, 0, sizeof(st));
    char rate[40];
    mc_py_float_repr(mc_now_s() - start, rate, sizeof(rate));
    double t0 = mc_now_s();
    if (ok) {
        printf("Time to startup: %s\n", rate);
        fflush(stdout);
        ok = pipe_run(&p, &o, part_size, &st, t0, err, sizeof(err));
    }
    ok = outputs_finish(&o, !ok, err, sizeof(err));
    if (ok) report(a, &st, &o, t0);

    outputs_free(&o);
    free(p.key_len);
    mc_tokenizer_free(tok);
    mc_prep_free_files(files, n_files);
    if (!ok) mc_user_error("%s", err);
    return 0;
}
