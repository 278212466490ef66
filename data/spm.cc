// The C view of SentencePiece (data/spm.h). C++ only because the library's API is C++; no C++
// exception or type crosses into C: each entry point catches everything and reports it as the
// C functions around it do (NULL or -1 with one line in err).
#include "data/spm.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "data/spm_proto.h"

struct mc_spm {
    sentencepiece::SentencePieceProcessor proc;
    uint64_t gen;  // unique per load, never 0: tags this model's chunk-cache entries
    bool chunk_ok; // encode(text) is the concatenation of encode over its space-split chunks
    std::vector<int> empty_chunk; // what an empty chunk encodes to in context (see spm_encode)
};

static void set_err(char *err, size_t n, const std::string &msg)
{
    if (err && n) std::snprintf(err, n, "%s", msg.c_str());
}

static std::atomic<uint64_t> spm_gen{0};

static const char kSpace[] = "\xe2\x96\x81"; // U+2581, the escaped space

/* Whether Encode(text) equals the concatenation of Encode(chunk) over text's chunks split at ASCII
 * spaces (checked against v0.1.97's normalizer.cc, model_interface.cc, bpe_model.cc):
 * - the normalizer maps each character alone (no rule's source holds a space) and adds the
 *   dummy prefix ▁, so a chunk alone gets the ▁ that the space before it gives it in context;
 * - with remove_extra_whitespaces it drops leading whitespace (after nmt_nfkc: tab, newline,
 *   NBSP, U+3000, ...), turns each run into one ▁ and drops trailing ones, so whitespace at a
 *   chunk's edges and empty chunks vanish either way; without it every space is a ▁ of its own:
 *   an empty chunk is then a lone ▁ word (empty_chunk), which Encode("") cannot give;
 * - a literal ▁ at a chunk's end would be dropped as trailing whitespace alone but not in
 *   context, so texts holding one are not split (spm_encode);
 * - BPE merges two symbols only into a piece of the model, so no merge crosses a word boundary
 *   when no piece has a ▁ after its first character (nor a space), merges in one word never
 *   touch another's symbols, and the agenda's order restricted to one word is that word's own;
 * - Encode merges consecutive unknown pieces into one <unk>: a word's first symbol starts with
 *   ▁, so it is never unknown when ▁ is a piece or unknowns fall back to bytes.
 * Unigram is left out: its Viterbi adds float scores along the whole text, so a word's best
 * segmentation can round differently after a long prefix than alone. */
static bool chunk_split_exact(const sentencepiece::SentencePieceProcessor &proc, bool *rew)
{
    const std::string m = proc.serialized_model_proto();
    mc_spm_proto_flags_t f;
    if (mc_spm_proto_flags(reinterpret_cast<const unsigned char *>(m.data()), m.size(), &f) != 0)
        return false;
    *rew = f.remove_extra_whitespaces;
    if (f.model_type != 2 || !f.split_by_whitespace || f.treat_whitespace_as_suffix ||
        !f.add_dummy_prefix || !f.escape_whitespaces)
        return false;
    for (int id = 0; id < proc.GetPieceSize(); id++) {
        const std::string &p = proc.IdToPiece(id);
        if (p.find(' ') != std::string::npos || p.find(kSpace, 1) != std::string::npos)
            return false;
    }
    const int sid = proc.PieceToId(kSpace);
    return f.byte_fallback || (sid >= 0 && !proc.IsUnknown(sid));
}

/* Without remove_extra_whitespaces " " normalizes to "▁▁", two lone-▁ words (no piece joins
 * them, see chunk_split_exact): half its ids are one empty chunk's. false when that fails. */
static bool lone_space_word(mc_spm_t *sp)
{
    std::vector<int> v;
    if (!sp->proc.Encode(" ", &v).ok() || v.empty() || v.size() % 2) return false;
    const size_t h = v.size() / 2;
    if (!std::equal(v.begin(), v.begin() + h, v.begin() + h)) return false;
    sp->empty_chunk.assign(v.begin(), v.begin() + h);
    return true;
}

/* Per-thread chunk cache, as data/bpe.c's piece cache: direct-mapped, keyed by the chunk's bytes
 * in full and the model's gen; bounded (chunks of at most CC_MAXLEN bytes and CC_MAXIDS ids, a
 * collision overwrites). thread_local: no lock while workers encode at once, and the table is
 * freed at thread exit (and at exit for the main thread). */
enum { CC_BITS = 16, CC_N = 1 << CC_BITS, CC_MAXLEN = 46, CC_MAXIDS = 12 };

struct cc_slot {
    uint64_t gen; // 0: empty
    uint8_t len, nids;
    int32_t ids[CC_MAXIDS];
    unsigned char bytes[CC_MAXLEN];
};

static thread_local std::unique_ptr<cc_slot[]> cc_table;

static uint64_t cc_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; // FNV-1a, then a final mix for the top bits
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

/* Appends Encode(chunk) to v, through the cache. */
static sentencepiece::util::Status encode_chunk(const mc_spm_t *sp, const char *s, size_t n,
                                                std::vector<int> *v)
{
    cc_slot *slot = nullptr;
    if (n <= CC_MAXLEN) {
        if (!cc_table) cc_table.reset(new cc_slot[CC_N]());
        slot = &cc_table[cc_hash(s, n) >> (64 - CC_BITS)];
        if (slot->gen == sp->gen && slot->len == n && std::memcmp(slot->bytes, s, n) == 0) {
            v->insert(v->end(), slot->ids, slot->ids + slot->nids);
            return sentencepiece::util::Status();
        }
    }
    std::vector<int> w;
    const auto st = sp->proc.Encode(std::string_view(s, n), &w);
    if (!st.ok()) return st;
    v->insert(v->end(), w.begin(), w.end());
    if (slot && w.size() <= CC_MAXIDS) {
        slot->gen = sp->gen;
        slot->len = static_cast<uint8_t>(n);
        slot->nids = static_cast<uint8_t>(w.size());
        std::copy(w.begin(), w.end(), slot->ids);
        std::memcpy(slot->bytes, s, n);
    }
    return st;
}

/* Encode(text), split at ASCII spaces when that is exact (see chunk_split_exact). */
static sentencepiece::util::Status spm_encode(const mc_spm_t *sp, std::string_view text,
                                              bool cached, std::vector<int> *v)
{
    if (!cached || !sp->chunk_ok || text.find(kSpace) != std::string_view::npos)
        return sp->proc.Encode(text, v);
    v->clear();
    if (text.empty()) return sentencepiece::util::Status();
    for (size_t at = 0;;) { // a text with k spaces has k + 1 chunks, empty ones included
        size_t end = text.find(' ', at);
        if (end == std::string_view::npos) end = text.size();
        if (end > at) {
            const auto st = encode_chunk(sp, text.data() + at, end - at, v);
            if (!st.ok()) return st;
        } else {
            v->insert(v->end(), sp->empty_chunk.begin(), sp->empty_chunk.end());
        }
        if (end == text.size()) break;
        at = end + 1;
    }
    return sentencepiece::util::Status();
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
        sp->gen = spm_gen.fetch_add(1, std::memory_order_relaxed) + 1;
        bool rew = true;
        sp->chunk_ok = chunk_split_exact(sp->proc, &rew);
        if (sp->chunk_ok && !rew) sp->chunk_ok = lone_space_word(sp);
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

extern "C" bool mc_spm_chunk_cache(const mc_spm_t *sp) { return sp->chunk_ok; }

extern "C" int mc_spm_encode(const mc_spm_t *sp, const char *text, size_t len, bool cached,
                             int32_t **ids, size_t *count, char *err, size_t n)
{
    *ids = nullptr;
    *count = 0;
    try {
        std::vector<int> v;
        const auto st = spm_encode(sp, std::string_view(text ? text : "", len), cached, &v);
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
