/* The zip container of torch.save (caffe2/serialize/inline_container.cc, with miniz).
 *
 * Every record sits in one folder, the archive name (torch: the file's basename without its
 * extension, "archive" when saving to a stream). Records are stored, never compressed. Each
 * record's data starts at a multiple of 64 bytes: torch pads the local header's extra field
 * with a "FB" field of 'Z' bytes. The local header carries no CRC or sizes (general purpose
 * flags 0x0808: sizes in a data descriptor after the data, UTF-8 names); the central directory
 * has them. miniz runs in zip64 mode, so every archive ends with a zip64 end-of-central-
 * directory record and locator before the classic one, and a record whose size or offset is
 * 4 GiB or more (a 1B-parameter model in fp32 is a 4 GB file) carries zip64 extra fields and a
 * 64-bit data descriptor. Versions, times and attributes are all zero, as miniz writes them.
 *
 * The writer streams: each record goes to the FILE* as it is added (tensors are written from
 * their memory, never gathered). The reader parses an archive in memory (a mapped file):
 * classic or zip64 end records, central directory, local headers, all bounds-checked. */
#ifndef MC_TORCHFMT_TORCHZIP_H
#define MC_TORCHFMT_TORCHZIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- writer ---------------------------------------------------------------------------------- */

typedef struct mc_zipw mc_zipw_t;

/* An archive on f (positioned at the start of an empty file or stream; zip offsets count from
 * there) whose records live in the folder `archive`. force_zip64: write zip64 fields for every
 * size and offset, as if each were 4 GiB or more (tests use it to cover the zip64 paths with
 * small files; readers must and do accept it). NULL when out of memory. */
mc_zipw_t *mc_zipw_open(FILE *f, const char *archive, bool force_zip64);
/* Writes record <archive>/<name> holding size bytes of data. *crc (may be NULL) receives the
 * CRC-32. Returns 0, or -1 with one line in err. */
int mc_zipw_add(mc_zipw_t *z, const char *name, const void *data, uint64_t size, uint32_t *crc,
                char *err, size_t errn);
/* Writes the central directory and end records, flushes f (does not close it) and frees z.
 * Returns 0, or -1 with one line in err. */
int mc_zipw_finish(mc_zipw_t *z, char *err, size_t errn);
void mc_zipw_free(mc_zipw_t *z); /* after an error */

/* ---- reader ---------------------------------------------------------------------------------- */

typedef struct {
    char *name;      /* full name ("archive/data/0"), NUL-terminated */
    uint64_t offset; /* of the data, from the start of the archive */
    uint64_t size;
    uint32_t crc; /* from the central directory */
} mc_zipentry_t;

typedef struct {
    const uint8_t *base;
    uint64_t size;
    mc_zipentry_t *entries; /* in central directory order */
    size_t n;
    char *prefix;    /* the archive folder, from the first record's name (as torch) */
    uint32_t *index; /* hash of names (internal) */
    size_t index_cap;
} mc_zipr_t;

/* Parses the archive in base[0..size). Fails with one line in err for anything that is not a
 * stored, unencrypted zip whose every record lies inside the file before the central directory
 * (a truncated file loses its end records: "no end-of-central-directory record"). */
int mc_zipr_open(mc_zipr_t *z, const void *base, uint64_t size, char *err, size_t errn);
/* The record <prefix>/<name>, or NULL. */
const mc_zipentry_t *mc_zipr_find(const mc_zipr_t *z, const char *name);
/* Checks a record's data against its CRC-32: "CRC mismatch in archive/data/3". */
int mc_zipr_check_crc(const mc_zipr_t *z, const mc_zipentry_t *e, char *err, size_t errn);
void mc_zipr_close(mc_zipr_t *z);

#endif
