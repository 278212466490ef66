// The C view of SentencePiece (data/spm.h). C++ only because the library's API is C++; no C++
// exception or type crosses into C: each entry point catches everything and reports it as the
// C functions around it do (NULL or -1 with one line in err).
#include "data/spm.h"

#include <sentencepiece_processor.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

struct mc_spm {
    sentencepiece::SentencePieceProcessor proc;
};

static void set_err(char *err, size_t n, const std::string &msg)
{
    if (err && n) std::snprintf(err, n, "%s", msg.c_str());
}

extern "C" mc_spm_t *mc_spm_load(const char *path, char *err, size_t n)
{
    try {
        mc_spm_t *sp = new mc_spm_t;
        const auto st = sp->proc.Load(path);
        if (!st.ok()) {
            set_err(err, n,
                    std::string("cannot load the SentencePiece model '") + path +
                        "' (--tokenizer-model): " + st.ToString());
            delete sp;
            return nullptr;
        }
        return sp;
    } catch (const std::exception &e) {
        set_err(err, n,
                std::string("cannot load the SentencePiece model '") + path + "': " + e.what());
        return nullptr;
    }
}

extern "C" void mc_spm_free(mc_spm_t *sp) { delete sp; }

extern "C" mc_spm_info_t mc_spm_info(const mc_spm_t *sp)
{
    const auto &p = sp->proc;
    return mc_spm_info_t{p.GetPieceSize(), p.unk_id(), p.bos_id(), p.eos_id(), p.pad_id()};
}

extern "C" const char *mc_spm_id_to_piece(const mc_spm_t *sp, int32_t id, size_t *len)
{
    const std::string &s = sp->proc.IdToPiece(id);
    if (len) *len = s.size();
    return s.c_str();
}

extern "C" int32_t mc_spm_piece_to_id(const mc_spm_t *sp, const char *piece)
{
    const int id = sp->proc.PieceToId(piece);
    if (id < 0 || id >= sp->proc.GetPieceSize() || sp->proc.IdToPiece(id) != piece) return -1;
    return id;
}

extern "C" int mc_spm_encode(const mc_spm_t *sp, const char *text, size_t len, int32_t **ids,
                             size_t *count, char *err, size_t n)
{
    *ids = nullptr;
    *count = 0;
    try {
        std::vector<int> v;
        const auto st = sp->proc.Encode(std::string_view(text ? text : "", len), &v);
        if (!st.ok()) {
            set_err(err, n, "SentencePiece: " + st.ToString());
            return -1;
        }
        if (v.empty()) return 0;
        int32_t *out = static_cast<int32_t *>(std::malloc(v.size() * sizeof(int32_t)));
        if (!out) throw std::bad_alloc();
        for (size_t i = 0; i < v.size(); i++) out[i] = v[i];
        *ids = out;
        *count = v.size();
        return 0;
    } catch (const std::exception &e) {
        set_err(err, n, std::string("SentencePiece: ") + e.what());
        return -1;
    }
}

extern "C" char *mc_spm_decode(const mc_spm_t *sp, const int32_t *ids, size_t count, size_t *len)
{
    try {
        const int size = sp->proc.GetPieceSize();
        std::vector<int> v(count);
        for (size_t i = 0; i < count; i++) {
            if (ids[i] < 0 || ids[i] >= size) return nullptr;
            v[i] = ids[i];
        }
        std::string s;
        if (!sp->proc.Decode(v, &s).ok()) return nullptr;
        char *out = static_cast<char *>(std::malloc(s.size() + 1));
        if (!out) return nullptr;
        std::memcpy(out, s.data(), s.size());
        out[s.size()] = 0;
        if (len) *len = s.size();
        return out;
    } catch (const std::exception &) {
        return nullptr;
    }
}
