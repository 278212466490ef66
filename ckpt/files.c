/* nftw and renameat2 flags are X/Open and GNU interfaces */
#define _GNU_SOURCE
#include "ckpt/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "torchfmt/torch_save.h"
#include "base/error.h"

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

void mc_ckpt_iter_dir(char *buf, size_t n, const char *dir, int64_t iteration, bool release,
                      const char *tmp)
{
    char name[64];
    if (release) snprintf(name, sizeof(name), "release");
    else snprintf(name, sizeof(name), "iter_%07" PRId64, iteration);
    if (tmp && *tmp) snprintf(buf, n, "%s/%s.tmp-%s", dir, name, tmp);
    else snprintf(buf, n, "%s/%s", dir, name);
}

void mc_ckpt_rank_name(char *buf, size_t n, int tp_rank, int pp_size, int pp_rank, int ep_size,
                       int ep_rank)
{
    char ep[16] = "";
    if (ep_size > 1) snprintf(ep, sizeof(ep), "_%03d", ep_rank);
    if (pp_size > 1) snprintf(buf, n, "mp_rank_%02d_%03d%s", tp_rank, pp_rank, ep);
    else snprintf(buf, n, "mp_rank_%02d%s", tp_rank, ep);
}

int mc_ckpt_fsync(const char *path, char *err, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return mc_path_errf(err, n, path, "cannot open to sync: %s", strerror(errno));
    /* some filesystems refuse fsync on directories (EINVAL): nothing more can be done there */
    int rc = fsync(fd) != 0 && errno != EINVAL ? -1 : 0;
    int e = errno;
    close(fd);
    return rc ? mc_path_errf(err, n, path, "fsync failed: %s", strerror(e)) : 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)ftw;
    int rc = flag == FTW_DP ? rmdir(path) : unlink(path);
    return rc != 0 && errno != ENOENT ? -1 : 0;
}

int mc_ckpt_rmtree(const char *path, char *err, size_t n)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : mc_path_errf(err, n, path, "%s", strerror(errno));
    if (nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return mc_path_errf(err, n, path, "cannot remove: %s", strerror(errno));
    return 0;
}

static void parent_of(const char *path, char *buf, size_t n)
{
    snprintf(buf, n, "%s", path);
    char *slash = strrchr(buf, '/');
    if (!slash) snprintf(buf, n, ".");
    else if (slash == buf) buf[1] = '\0';
    else *slash = '\0';
}

int mc_ckpt_publish_dir(const char *staging, const char *final, char *err, size_t n)
{
    char parent[MC_CKPT_PATH_MAX], aside[MC_CKPT_PATH_MAX + 16];
    parent_of(final, parent, sizeof(parent));
    struct stat st;
    if (lstat(final, &st) != 0) {
        if (rename(staging, final) != 0)
            return mc_path_errf(err, n, final, "cannot rename %s to it: %s", staging,
                                strerror(errno));
        return mc_ckpt_fsync(parent, err, n);
    }
    /* Saving an iteration that exists (a run resumed at its last checkpoint): swap the trees in
     * one step so the tracker, which may name this iteration, never points at nothing. */
    if (syscall(SYS_renameat2, AT_FDCWD, staging, AT_FDCWD, final, RENAME_EXCHANGE) == 0) {
        if (mc_ckpt_fsync(parent, err, n) != 0) return -1;
        return mc_ckpt_rmtree(staging, err, n); /* now holds the old tree */
    }
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
        return mc_path_errf(err, n, final, "cannot exchange it with %s: %s", staging,
                            strerror(errno));
    /* no exchange on this filesystem: move the old tree aside first (a short window) */
    snprintf(aside, sizeof(aside), "%s.old", staging);
    if (rename(final, aside) != 0 || rename(staging, final) != 0)
        return mc_path_errf(err, n, final, "cannot replace it with %s: %s", staging,
                            strerror(errno));
    if (mc_ckpt_fsync(parent, err, n) != 0) return -1;
    return mc_ckpt_rmtree(aside, err, n);
}

int mc_ckpt_write_tracker(const char *dir, const char *text, const char *tmp, char *err, size_t n)
{
    char path[MC_CKPT_PATH_MAX], tpath[MC_CKPT_PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/%s", dir, MC_CKPT_TRACKER);
    snprintf(tpath, sizeof(tpath), "%s.tmp-%s", path, tmp);
    int fd = open(tpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) return mc_path_errf(err, n, tpath, "cannot create: %s", strerror(errno));
    size_t len = strlen(text);
    bool ok = write(fd, text, len) == (ssize_t)len && fsync(fd) == 0;
    int e = errno;
    if (close(fd) != 0 && ok) ok = false, e = errno;
    if (!ok) {
        unlink(tpath);
        return mc_path_errf(err, n, tpath, "write failed: %s", strerror(e));
    }
    if (rename(tpath, path) != 0) {
        e = errno;
        unlink(tpath);
        return mc_path_errf(err, n, path, "cannot replace it: %s", strerror(e));
    }
    return mc_ckpt_fsync(dir, err, n);
}

int mc_ckpt_read_tracker(const char *dir, bool *found, int64_t *iteration, bool *release, char *err,
                         size_t n)
{
    char path[MC_CKPT_PATH_MAX], text[64], shown[MC_SHOWN_MAX + 4];
    snprintf(path, sizeof(path), "%s/%s", dir, MC_CKPT_TRACKER);
    *found = *release = false;
    *iteration = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT || errno == ENOTDIR) return 0;
        return mc_path_errf(err, n, path, "cannot read: %s", strerror(errno));
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && !S_ISREG(st.st_mode)) {
        fclose(f);
        return mc_path_errf(err, n, path,
                            "is %s, not Megatron's tracker file (remove it, or write "
                            "the iteration of an iter_* directory into a file of that name)",
                            S_ISDIR(st.st_mode) ? "a directory" : "not a regular file");
    }
    size_t len = fread(text, 1, sizeof(text) - 1, f);
    bool more = fgetc(f) != EOF, bad = ferror(f);
    int read_errno = errno;
    fclose(f);
    if (bad) return mc_path_errf(err, n, path, "cannot read: %s", strerror(read_errno));
    text[len] = '\0';
    *found = true;
    /* Python's str.strip() then int() or 'release' */
    char *s = text, *e = text + len;
    while (s < e && strchr(" \t\r\n", *s)) s++;
    while (e > s && strchr(" \t\r\n", e[-1])) *--e = '\0';
    if (!more && strcmp(s, "release") == 0) {
        *release = true;
        return 0;
    }
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (more || *s == '\0' || *end != '\0' || errno || v < 0)
        return mc_path_errf(err, n, path,
                            "invalid metadata file: '%s' is neither an iteration nor "
                            "'release' (remove it to start from scratch, or write the iteration of "
                            "an iter_* directory into it)",
                            mc_shown(s, shown));
    *iteration = v;
    return 0;
}

static bool is_stale(const char *name)
{
    return (strncmp(name, "iter_", 5) == 0 || strncmp(name, "release", 7) == 0 ||
            strncmp(name, MC_CKPT_TRACKER, strlen(MC_CKPT_TRACKER)) == 0) &&
           strstr(name, ".tmp-") != NULL;
}

int mc_ckpt_remove_stale(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int removed = 0;
    struct dirent *e;
    char path[MC_CKPT_PATH_MAX + 256];
    while ((e = readdir(d)) != NULL) {
        if (!is_stale(e->d_name)) continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (mc_ckpt_rmtree(path, NULL, 0) == 0) removed++;
    }
    closedir(d);
    return removed;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void mc_ckpt_list(const char *dir, const char *prefix, char *buf, size_t n)
{
    buf[0] = '\0';
    DIR *d = opendir(dir);
    if (!d) return;
    char *names[16];
    int k = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && k < 16)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && !strstr(e->d_name, ".tmp-"))
            names[k++] = strdup(e->d_name);
    closedir(d);
    int valid = 0;
    for (int i = 0; i < k; i++)
        if (names[i]) names[valid++] = names[i];
    qsort(names, (size_t)valid, sizeof(*names), by_name);
    for (int i = 0; i < valid; i++) {
        size_t len = strlen(buf);
        if (len + 1 < n) snprintf(buf + len, n - len, "%s%s", i ? ", " : "", names[i]);
        free(names[i]);
    }
}

int mc_ckpt_write_file(const char *path, const mc_pyobj_t *obj, char *err, size_t n)
{
    if (!obj) return mc_path_errf(err, n, path, "out of host memory building the checkpoint");
    /* torch names the records' folder after the file: "model_optim_rng" for .../model_optim_rng.pt */
    char archive[256];
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(archive, sizeof(archive), "%s", base);
    char *dot = strrchr(archive, '.');
    if (dot && dot != archive) *dot = '\0';
    FILE *f = fopen(path, "wb");
    if (!f) return mc_path_errf(err, n, path, "cannot create: %s", strerror(errno));
    mc_torch_save_opts_t o = {.archive_name = archive};
    int rc = mc_torch_save_stream(f, obj, &o, err, n);
    if (rc) {
        char inner[1024];
        snprintf(inner, sizeof(inner), "%s", err);
        mc_path_errf(err, n, path, "%s", inner);
    } else if (fsync(fileno(f)) != 0) {
        rc = mc_path_errf(err, n, path, "fsync failed: %s", strerror(errno));
    }
    if (fclose(f) != 0 && !rc) rc = mc_path_errf(err, n, path, "write failed: %s", strerror(errno));
    return rc;
}

int mc_ckpt_load_rank0(const char *dir, int64_t step, char *path, size_t pn, mc_pyobj_t **ck,
                       char *err, size_t n)
{
    *ck = NULL;
    bool found, release;
    int64_t iteration;
    if (mc_ckpt_read_tracker(dir, &found, &iteration, &release, err, n) != 0) return -1;
    if (!found) return 0;
    if (step > 0) {
        iteration = step;
        release = false;
    }
    char iter_dir[MC_CKPT_PATH_MAX];
    mc_ckpt_iter_dir(iter_dir, sizeof(iter_dir), dir, iteration, release, NULL);
    for (int k = 0; k < 4; k++) { /* pp 1 or more, ep 1 or more */
        char rank[32];
        mc_ckpt_rank_name(rank, sizeof(rank), 0, k % 2 ? 2 : 1, 0, k / 2 ? 2 : 1, 0);
        snprintf(path, pn, "%s/%s/model_optim_rng.pt", iter_dir, rank);
        if (access(path, F_OK) == 0) return mc_torch_load(path, 0, ck, err, n);
    }
    /* torch_dist: the non-sharded state (args included) is common.pt */
    snprintf(path, pn, "%s/metadata.json", iter_dir);
    if (access(path, F_OK) != 0) return 0;
    snprintf(path, pn, "%s/common.pt", iter_dir);
    return mc_torch_load(path, 0, ck, err, n);
}
