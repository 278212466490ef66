/* Fuzzes the DCP .metadata reader (torchfmt/dcp.h): mutated .metadata pickles go to
 * mc_dcp_meta_read_mem, which must return 0 or a one-line error, never crash. What parses is
 * walked (every key found again by name, every chunk inside its shape) and written again
 * (mc_dcp_meta_write) and reparsed. Seeds: the .metadata files on the command line (Megatron's
 * reference checkpoints) and one written here.
 *
 *   fuzz_dcp [--seconds N] [--seed S] [--crashes DIR] [.metadata...] */
#include "test/fuzz/fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "torchfmt/dcp.h"

#define MAX_SEEDS 8
#define MAX_LEN (4u << 20)

typedef struct {
    fuzz_buf_t seeds[MAX_SEEDS];
    int n;
    fuzz_buf_t cur;
} dcp_ctx_t;

static void add(dcp_ctx_t *c, const void *p, size_t n)
{
    if (c->n < MAX_SEEDS) fuzz_buf_set(&c->seeds[c->n++], p, n);
}

/* A .metadata of a small index: a 2-D tensor in two chunks, a 1-D bf16 one, a byte item. */
static void own_seed(dcp_ctx_t *c)
{
    mc_dcp_records_t r = {0};
    r.cap = 4;
    r.items = calloc(r.cap, sizeof *r.items);
    static const struct {
        const char *key;
        bool bytes;
        mc_torch_dtype_t dt;
        int ndim;
        int64_t shape[2], off[2], sizes[2];
        const char *file;
        uint64_t at, len;
    } rows[] = {
        {"w", false, MC_TORCH_FLOAT32, 2, {4, 6}, {0, 0}, {4, 3}, "__0_0.distcp", 0, 1500},
        {"w", false, MC_TORCH_FLOAT32, 2, {4, 6}, {0, 3}, {4, 3}, "__1_0.distcp", 0, 1500},
        {"b", false, MC_TORCH_BFLOAT16, 1, {9}, {0}, {9}, "__0_1.distcp", 1200, 1400},
        {"o/shard_0_1", true, MC_TORCH_UINT8, 0, {0}, {0}, {0}, "__0_1.distcp", 0, 1200},
    };
    for (size_t i = 0; i < 4; i++) {
        mc_dcp_record_t *x = &r.items[r.n++];
        x->key = strdup(rows[i].key);
        x->bytes = rows[i].bytes;
        x->dtype = rows[i].dt;
        x->ndim = rows[i].ndim;
        for (int d = 0; d < x->ndim; d++) {
            x->shape[d] = rows[i].shape[d];
            x->chunk.offsets[d] = rows[i].off[d];
            x->chunk.sizes[d] = rows[i].sizes[d];
        }
        snprintf(x->chunk.file, sizeof x->chunk.file, "%s", rows[i].file);
        x->chunk.offset = rows[i].at;
        x->chunk.length = rows[i].len;
    }
    mc_dcp_meta_t m;
    char err[512], path[] = "/tmp/fuzz_dcp.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || mc_dcp_meta_from_records(&r, &m, err, sizeof err) ||
        mc_dcp_meta_write(path, &m, "/ckpt/iter_0000001", err, sizeof err)) {
        fprintf(stderr, "fuzz dcp: cannot build the seed: %s\n", err);
        exit(2);
    }
    close(fd);
    fuzz_buf_t b = {0};
    if (fuzz_read_file(path, &b) != 0) exit(2);
    add(c, b.p, b.n);
    fuzz_buf_free(&b);
    unlink(path);
    mc_dcp_meta_free(&m);
    mc_dcp_records_free(&r);
}

static void make(void *ctx, long i)
{
    dcp_ctx_t *c = ctx;
    const fuzz_buf_t *s = &c->seeds[fuzz_below((uint64_t)c->n)];
    fuzz_buf_set(&c->cur, s->p, s->n);
    fuzz_mutate(&c->cur, 0, MAX_LEN);
}

static void run(void *ctx)
{
    dcp_ctx_t *c = ctx;
    mc_dcp_meta_t m;
    char err[1024];
    if (mc_dcp_meta_read_mem(c->cur.p, c->cur.n, "fuzz.metadata", &m, err, sizeof err)) {
        if (!memchr(err, '\0', sizeof err) || strchr(err, '\n') || !strstr(err, "fuzz.metadata"))
            abort(); /* one line naming the file */
        return;
    }
    for (size_t i = 0; i < m.n; i++) {
        const mc_dcp_entry_t *e = &m.entries[i];
        if (mc_dcp_meta_find(&m, e->key) != e || (e->bytes && e->n_chunks != 1)) abort();
        for (size_t k = 0; k < e->n_chunks; k++)
            for (int d = 0; d < e->ndim; d++)
                if (e->chunks[k].offsets[d] + e->chunks[k].sizes[d] > e->shape[d]) abort();
    }
    /* what parses writes again and reads back the same */
    char path[] = "/tmp/fuzz_dcp_rt.XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) {
        close(fd);
        mc_dcp_meta_t back;
        if (mc_dcp_meta_write(path, &m, NULL, err, sizeof err) == 0) {
            if (mc_dcp_meta_read(path, &back, err, sizeof err) || back.n != m.n) abort();
            mc_dcp_meta_free(&back);
        }
        unlink(path);
    }
    mc_dcp_meta_free(&m);
}

static void save(void *ctx, const char *prefix)
{
    dcp_ctx_t *c = ctx;
    char path[4300];
    snprintf(path, sizeof path, "%s.metadata", prefix);
    fuzz_write_file(path, c->cur.p, c->cur.n);
}

int main(int argc, char **argv)
{
    fuzz_opts_t o;
    fuzz_parse(&o, argc, argv, "[.metadata...]");
    static dcp_ctx_t c;
    for (int k = 0; k < o.argc; k++) {
        fuzz_buf_t b = {0};
        if (fuzz_read_file(o.argv[k], &b) != 0) {
            fprintf(stderr, "fuzz dcp: cannot read %s\n", o.argv[k]);
            return 2;
        }
        add(&c, b.p, b.n);
        fuzz_buf_free(&b);
    }
    own_seed(&c);
    static const int allowed[] = {0};
    fuzz_target_t t = {"dcp", make, run, save, allowed, 1, &c};
    long failures = fuzz_loop(&o, &t);
    for (int s = 0; s < MAX_SEEDS; s++) fuzz_buf_free(&c.seeds[s]);
    fuzz_buf_free(&c.cur);
    return failures ? 1 : 0;
}
