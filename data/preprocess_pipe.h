/* preprocess-data's pieces shared by its files (not an API): the chunks that travel from the
 * reader thread through the worker threads to the in-order writer (preprocess.c), the per-line
 * encoding the workers do (preprocess_encode.c), and the input and output files
 * (preprocess_files.c). */
#ifndef MC_DATA_PREPROCESS_PIPE_H
#define MC_DATA_PREPROCESS_PIPE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#include "data/preprocess.h" /* mc_preprocess_args_t */
#include "data/indexed.h"
#include "data/json_scan.h"
#include "data/tokenizer.h"

enum {
    CHUNK_BYTES = 64 << 10, /* a chunk is closed once it holds this much text ... */
    CHUNK_LINES = 4096,     /* ... or this many lines */
    READ_BYTES = 1 << 20,   /* gzread block */
    ERR_LEN = 1024,
};

/* ---- chunks ---- */

enum { SLOT_FREE, SLOT_FILLED, SLOT_DONE };

typedef struct {
    int state;
    int64_t seq; /* chunk number in input order */
    /* input, owned by the reader while filling */
    char *text; /* the lines back to back, without their '\n' */
    size_t text_len, text_cap;
    size_t *line_off; /* [n_lines + 1] */
    int n_lines, lines_cap;
    int file;             /* index into the input list */
    int64_t first_line;   /* 1-based line number (in that file) of line 0 */
    int64_t first_global; /* 0-based line number over all inputs of line 0 */
    /* output, owned by a worker while tokenizing */
    mc_ids_t *tokens;      /* [keys] every document's tokens, back to back */
    mc_ids_t *lens;        /* [keys] sequence lengths */
    int32_t *nseq;         /* [keys * lines_cap] sequences per document and key */
    unsigned char *bad;    /* [lines_cap] the line is malformed */
    int first_bad;         /* first malformed line, -1 if none */
    char bad_msg[ERR_LEN]; /* why, for first_bad */
} mc_prep_chunk_t;

typedef struct {
    /* configuration */
    const mc_preprocess_args_t *a;
    const mc_tokenizer_t *tok;
    int32_t eod;
    char **files;
    int n_files;
    int keys;
    size_t *key_len; /* strlen of each --json-keys key */
    /* ring */
    mc_prep_chunk_t *slots;
    int n_slots;
    pthread_mutex_t mu;
    pthread_cond_t cv_free, cv_work, cv_done;
    int64_t produced;  /* chunks handed to the workers so far */
    int64_t next_work; /* next chunk a worker takes */
    bool eof;          /* the reader is done (produced is final) */
    bool stop;         /* abort or --max-documents reached: everybody winds down */
    bool failed;
    char err[ERR_LEN];
} mc_prep_pipe_t;

/* A worker's buffers. */
typedef struct {
    char *buf; /* decoded strings with escapes */
    size_t cap;
    mc_json_val_t *vals; /* [keys], then two size_t marks per key (mc_prep_encode_chunk) */
} mc_prep_scratch_t;

/* The output files of one partition and key. */
typedef struct {
    char *prefix;
    mc_indexed_writer_t *w; /* open; NULL once finished (or never opened) */
    bool finished;          /* the files exist at prefix.bin/.idx */
} mc_prep_out_t;

/* Records the run's first error and stops every thread. */
void mc_prep_fail(mc_prep_pipe_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Grows *ptr (*cap elements of elem bytes) to hold need elements. False when out of memory. */
bool mc_prep_grow(void **ptr, size_t *cap, size_t need, size_t elem);

/* Parses and tokenizes every line of c (a worker's part): tokens, lens and nseq per key, bad[]
 * and the first bad line's message. */
void mc_prep_encode_chunk(mc_prep_pipe_t *p, mc_prep_chunk_t *c, mc_prep_scratch_t *sc);

/* ---- files (preprocess_files.c) ---- */

/* A malloc'd printf; exits on out of memory. */
char *mc_prep_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* zlib's message for the last error on gz, without the "path: " it starts with. */
const char *mc_prep_gz_message(gzFile gz, const char *path);

/* The script's input list: the path itself with one partition, the sorted glob otherwise. Every
 * file must be readable (user error otherwise). */
char **mc_prep_input_files(const mc_preprocess_args_t *a, int *n_out);
void mc_prep_free_files(char **files, int n);

/* Lines in a file as Python counts them (a last line without '\n' counts). */
int64_t mc_prep_count_lines(const char *path, char *buf);

/* Aborts o's writer, or removes its finished files. */
void mc_prep_remove_outputs(mc_prep_out_t *o);

#endif
