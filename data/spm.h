/* A plain C view of Google's SentencePiece library (Debian's libsentencepiece, a C++ API),
 * implemented by data/spm.cc: the only C++ in the product, because SentencePiece has no C API
 * and megatron-c must give the ids of the library Megatron calls, not of a rewrite. Internal to
 * the SentencePiece tokenizers (data/tokenizer_sp.c); the public interface is data/tokenizer.h.
 * A loaded model is read-only: encode and decode are safe from several threads at once. */
#ifndef MC_DATA_SPM_H
#define MC_DATA_SPM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mc_spm mc_spm_t;

/* The model's special ids (-1 when the model has none) and its number of pieces. */
typedef struct {
    int32_t piece_size, unk_id, bos_id, eos_id, pad_id;
} mc_spm_info_t;

/* Loads a .model file. NULL with one line in err naming the file on failure. */
mc_spm_t *mc_spm_load(const char *path, char *err, size_t n);
void mc_spm_free(mc_spm_t *sp);
mc_spm_info_t mc_spm_info(const mc_spm_t *sp);

/* The piece of id (0 <= id < piece_size), NUL-terminated, *len bytes; owned by the model. */
const char *mc_spm_id_to_piece(const mc_spm_t *sp, int32_t id, size_t *len);

/* The id of piece, or -1 when the model has no such piece (the library's PieceToId answers
 * unk_id for those). */
int32_t mc_spm_piece_to_id(const mc_spm_t *sp, const char *piece);

/* SentencePieceProcessor::Encode of text[0..len) as ids (Python's encode_as_ids): *ids is
 * malloc'd (NULL when *count is 0). 0, or -1 with err. cached: through a per-thread cache of the
 * ids of text's space-separated chunks, where the model allows that exactly (mc_spm_chunk_cache;
 * the same ids either way, only faster). */
int mc_spm_encode(const mc_spm_t *sp, const char *text, size_t len, bool cached, int32_t **ids,
                  size_t *count, char *err, size_t n);

/* Whether this model's encode may use the chunk cache (see data/spm.cc: BPE models whose
 * whitespace flags and pieces make encoding split exactly at spaces). */
bool mc_spm_chunk_cache(const mc_spm_t *sp);

/* SentencePieceProcessor::Decode of ids (Python's decode_ids): malloc'd, NUL-terminated, *len
 * bytes. NULL on an id outside [0, piece_size) or out of memory. */
char *mc_spm_decode(const mc_spm_t *sp, const int32_t *ids, size_t count, size_t *len);

#ifdef __cplusplus
}
#endif

#endif
