/* The few fields of a serialized SentencePiece ModelProto (sentencepiece_model.proto, v0.1.97)
 * that decide whether encoding may be split at ASCII spaces (data/spm.cc's chunk cache), read by
 * hand: Debian ships no generated protobuf header for the model. Field numbers:
 *   ModelProto:     trainer_spec = 2, normalizer_spec = 3
 *   TrainerSpec:    model_type = 3 (UNIGRAM 1, BPE 2), split_by_whitespace = 22,
 *                   treat_whitespace_as_suffix = 24, byte_fallback = 35
 *   NormalizerSpec: add_dummy_prefix = 3, remove_extra_whitespaces = 4, escape_whitespaces = 5
 * Absent fields take the proto's defaults. Internal to data/spm.cc. */
#ifndef MC_DATA_SPM_PROTO_H
#define MC_DATA_SPM_PROTO_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int model_type; /* 1 unigram, 2 BPE, 3 word, 4 char */
    bool split_by_whitespace, treat_whitespace_as_suffix, byte_fallback;
    bool add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces;
} mc_spm_proto_flags_t;

/* Fills *f from the serialized ModelProto buf[0..n). 0, or -1 when buf is not a well-formed
 * protobuf message (then *f holds the defaults). */
int mc_spm_proto_flags(const unsigned char *buf, size_t n, mc_spm_proto_flags_t *f);

#ifdef __cplusplus
}
#endif

#endif
