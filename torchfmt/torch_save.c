/* torch.save / torch.load (torch_save.h): the pickle (pickle.c, unpickle.c) inside the zip
 * container (torchzip.c), storages as records data/<key>. */
#include "torchfmt/torch_save.h"
#include "torchfmt/pickle.h"
#include "torchfmt/torchzip.h"
#include "torchfmt/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "tensor bytes are written and read in the machine's order, which torch records "
               "as 'little'");

/* ---- save ------------------------------------------------------------------------------------ */

int mc_torch_save_stream(FILE *f, const mc_pyobj_t *obj, const mc_torch_save_opts_t *opts,
                         char *err, size_t errn)
{
    const char *archive = opts && opts->archive_name ? opts->archive_name : "archive";
    uint8_t *pkl;
    size_t pkl_len;
    mc_pickle_storages_t st;
    if (mc_pickle_dump(obj, &pkl, &pkl_len, &st, err, errn)) return -1;
    mc_zipw_t *z = mc_zipw_open(f, archive, opts && opts->force_zip64);
    if (!z) {
        free(pkl);
        mc_pickle_storages_free(&st);
        return mc_errf(err, errn, "out of memory");
    }
    /* torch's serialization id: 20 digits of a hash of the record names, 20 of a combination
     * of their CRCs. Only an identifier; ours is computed the same way with our own hash. */
    uint64_t names = 0, crcs = 0;
    uint32_t crc;
    char key[32];
    int rc = 0;
#define ADD(name, data, size)                                                                      \
    do {                                                                                           \
        if (!rc) {                                                                                 \
            rc = mc_zipw_add(z, name, data, size, &crc, err, errn);                                \
            names ^= ck_hash(name, strlen(name)) + 0x9e3779b9 + (names << 6) + (names >> 2);       \
            crcs ^= crc + 0x9e3779b9 + (crcs << 6) + (crcs >> 2);                                  \
        }                                                                                          \
    } while (0)
    ADD("data.pkl", pkl, pkl_len);
    ADD(".format_version", "1", 1); /* storages in numeric key order */
    ADD(".storage_alignment", "64", 2);
    ADD("byteorder", "little", 6);
    for (size_t i = 0; i < st.n; i++) {
        snprintf(key, sizeof key, "data/%zu", i);
        ADD(key, st.storages[i]->storage.data, st.storages[i]->storage.nbytes);
    }
    ADD("version", "3\n", 2);
#undef ADD
    free(pkl);
    mc_pickle_storages_free(&st);
    if (!rc) {
        char id[48];
        snprintf(id, sizeof id, "%020llu%020llu", (unsigned long long)names,
                 (unsigned long long)crcs);
        rc = mc_zipw_add(z, ".data/serialization_id", id, 40, NULL, err, errn);
    }
    if (rc) {
        mc_zipw_free(z);
        return -1;
    }
    return mc_zipw_finish(z, err, errn);
}

/* torch's archive name for a path: its basename up to the last '.'. */
static void archive_name(const char *path, char *out, size_t n)
{
    const char *base = path;
    for (const char *p = path; *p; p++)
        if (*p == '/' || *p == '\\') base = p + 1;
    const char *dot = strrchr(base, '.');
    size_t len = dot ? (size_t)(dot - base) : strlen(base);
    if (len == 0 || len >= n) { /* torch refuses such names; a stream's name will do */
        snprintf(out, n, "archive");
        return;
    }
    memcpy(out, base, len);
    out[len] = '\0';
}

int mc_torch_save(const char *path, const mc_pyobj_t *obj, char *err, size_t errn)
{
    char archive[256];
    archive_name(path, archive, sizeof archive);
    FILE *f = fopen(path, "wb");
    if (!f) return mc_errf(err, errn, "%s: cannot create: %s", path, strerror(errno));
    mc_torch_save_opts_t opts = {.archive_name = archive};
    int rc = mc_torch_save_stream(f, obj, &opts, err, errn);
    if (fclose(f) && !rc) rc = mc_errf(err, errn, "write failed: %s", strerror(errno));
    if (rc) {
        ck_err_prefix(err, errn, path);
        unlink(path);
    }
    return rc;
}

/* ---- load ------------------------------------------------------------------------------------ */

typedef struct {
    mc_zipr_t *zip;
    mc_py_buf_t *owner; /* the mapping, or NULL for borrowed memory */
    unsigned flags;
    mc_pyobj_t **cache; /* storage by record index: a key met again is the same storage */
} loader_t;

static mc_pyobj_t *load_storage(void *ctx, const char *key, mc_torch_dtype_t dt, bool untyped,
                                int64_t numel, const char *location, char *err, size_t errn)
{
    loader_t *l = ctx;
    char name[300], shown[CK_SHOWN_MAX + 4];
    ck_shown(key, strlen(key), shown);
    if (strlen(key) > 200) {
        mc_errf(err, errn, "storage key '%s' too long", shown);
        return NULL;
    }
    snprintf(name, sizeof name, "data/%s", key);
    const mc_zipentry_t *e = mc_zipr_find(l->zip, name);
    if (!e) {
        mc_errf(err, errn, "storage '%s' has no record %s/data/%s", shown, l->zip->prefix, shown);
        return NULL;
    }
    size_t at = (size_t)(e - l->zip->entries);
    mc_pyobj_t *s = l->cache[at];
    if (s) {
        if (s->storage.dtype != dt || s->storage.untyped != untyped || s->storage.numel != numel) {
            mc_errf(err, errn, "storage '%s' is used as two different types", shown);
            return NULL;
        }
        return mc_py_incref(s);
    }
    size_t es = mc_torch_dtype_size(dt);
    if ((uint64_t)numel > UINT64_MAX / es || (uint64_t)numel * es != e->size) {
        mc_errf(err, errn, "%s holds %llu bytes but its storage is %lld x %s", e->name,
                (unsigned long long)e->size, (long long)numel, mc_torch_dtype_name(dt));
        return NULL;
    }
    void *data = e->size ? (void *)(l->zip->base + e->offset) : NULL;
    bool copy_out = l->flags & MC_TORCH_LOAD_COPY;
    mc_py_buf_t *owner = copy_out ? NULL : l->owner;
    if (copy_out && e->size) {
        void *copy = e->size <= SIZE_MAX ? malloc((size_t)e->size) : NULL;
        if (!copy || !(owner = mc_py_buf_new(copy, (size_t)e->size, false))) {
            free(copy);
            mc_errf(err, errn, "out of memory copying %s (%llu bytes)", e->name,
                    (unsigned long long)e->size);
            return NULL;
        }
        memcpy(copy, data, (size_t)e->size);
        data = copy;
    }
    s = mc_py_storage_owned_by(dt, untyped, data, numel, owner, location);
    if (copy_out) mc_py_buf_release(owner); /* the storage holds the copy now */
    if (!s) {
        mc_errf(err, errn, "out of memory");
        return NULL;
    }
    l->cache[at] = mc_py_incref(s);
    return s;
}

/* Loads the archive in buf[0..len); storages borrow from owner's bytes (unless copied). */
static int load(const uint8_t *buf, size_t len, mc_py_buf_t *owner, unsigned flags,
                mc_pyobj_t **out, char *err, size_t errn)
{
    *out = NULL;
    if (len >= 2 && buf[0] == 0x80 && buf[1] <= 5)
        return mc_errf(err, errn,
                       "a torch.save file in the legacy format of torch < 1.6 (not a "
                       "zip archive): not supported; re-save it with a newer torch");
    mc_zipr_t zip;
    if (mc_zipr_open(&zip, buf, len, err, errn)) return -1;
    int rc = -1;
    loader_t l = {.zip = &zip, .owner = owner, .flags = flags};
    const mc_zipentry_t *pkl = mc_zipr_find(&zip, "data.pkl");
    const mc_zipentry_t *ver = mc_zipr_find(&zip, ".data/version");
    const mc_zipentry_t *order = mc_zipr_find(&zip, "byteorder");
    if (!ver) ver = mc_zipr_find(&zip, "version");
    if (!(flags & MC_TORCH_LOAD_NO_CRC))
        for (size_t i = 0; i < zip.n; i++)
            if (mc_zipr_check_crc(&zip, &zip.entries[i], err, errn)) goto out;
    if (mc_zipr_find(&zip, "constants.pkl")) {
        mc_errf(err, errn, "a TorchScript archive (torch.jit.save), not a torch.save file");
        goto out;
    }
    if (!pkl || !ver) {
        mc_errf(err, errn, "no %s/%s record: not a torch.save archive", zip.prefix,
                pkl ? "version" : "data.pkl");
        goto out;
    }
    /* torch reads any version from 1 up to the one it writes torch.save files with, 3 */
    char v[16] = "";
    memcpy(v, zip.base + ver->offset, ver->size < sizeof v - 1 ? ver->size : sizeof v - 1);
    long version = strtol(v, NULL, 10);
    if (version < 1 || version > 10) {
        mc_errf(err, errn, "unsupported archive version '%.15s'", v);
        goto out;
    }
    if (order && !(order->size == 6 && !memcmp(zip.base + order->offset, "little", 6))) {
        mc_errf(err, errn, "a big-endian checkpoint (byteorder is not 'little'): not supported");
        goto out;
    }
    if (!(l.cache = calloc(zip.n, sizeof *l.cache))) {
        mc_errf(err, errn, "out of memory");
        goto out;
    }
    mc_unpickle_storages_t st = {.storage = load_storage, .ctx = &l};
    if (mc_unpickle(zip.base + pkl->offset, (size_t)pkl->size, &st, out, err, errn)) {
        ck_err_prefix(err, errn, pkl->name);
        goto out;
    }
    rc = 0;
out:
    if (l.cache)
        for (size_t i = 0; i < zip.n; i++) mc_py_decref(l.cache[i]);
    free(l.cache);
    mc_zipr_close(&zip);
    return rc;
}

int mc_torch_load_mem(const void *buf, size_t len, unsigned flags, mc_pyobj_t **out, char *err,
                      size_t errn)
{
    return load(buf, len, NULL, flags, out, err, errn);
}

int mc_torch_load(const char *path, unsigned flags, mc_pyobj_t **out, char *err, size_t errn)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return mc_errf(err, errn, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        close(fd);
        return mc_errf(err, errn, "%s: not a regular file", path);
    }
    if (sb.st_size == 0) {
        close(fd);
        return mc_errf(err, errn, "%s: empty file (not a checkpoint)", path);
    }
    size_t len = (size_t)sb.st_size;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return mc_errf(err, errn, "%s: cannot map: %s", path, strerror(e));
    mc_py_buf_t *owner = mc_py_buf_new(p, len, true);
    if (!owner) {
        munmap(p, len);
        return mc_errf(err, errn, "%s: out of memory", path);
    }
    int rc = load(p, len, owner, flags, out, err, errn);
    mc_py_buf_release(owner); /* unmapped now unless a storage points into it */
    if (rc) ck_err_prefix(err, errn, path);
    return rc;
}
