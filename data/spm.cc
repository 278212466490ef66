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
 * in full and the model's gen; bounded (chunks of at most CC_MAXLEN bytes and CC_MAXIDS ids; CC_WAYS
 * slots per hash, a miss evicts the oldest). thread_local: no lock while workers encode at once, and the table is
 * freed at thread exit (and at exit for the main thread). */
enum { CC_BITS = 17, CC_N = 1 << CC_BITS, CC_WAYS = 4, CC_MAXLEN = 46, CC_MAXIDS = 12 };

struct cc_slot {
    uint64_t gen; // 0: empty
    uint8_t len, nids;
    int32_t ids[CC_MAXIDS];
    unsigned char bytes[CC_MAXLEN];
};

// tag[i]: 16 bits of slot i's hash, a small array (256 KiB) that stays in cache, so a lookup
// reads only the slot whose tag matches instead of every way of the set
struct cc_table_t {
    uint16_t tag[CC_N];
    cc_slot slot[CC_N];
};

struct cc_free {
    void operator()(cc_table_t *t) const { std::free(t); }
};

// calloc: zero pages come from the kernel as they are touched, not memset up front
static thread_local std::unique_ptr<cc_table_t, cc_free> cc_table;

static uint64_t cc_hash(const char *s, size_t n)
{
    uint64_t h = n * 0x9e3779b97f4a7c15ull; // 8 bytes at a time, multiply-xorshift mixed
    for (; n >= 8; s += 8, n -= 8) {
        uint64_t w;
        std::memcpy(&w, s, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
    }
    uint64_t w = 0;
    std::memcpy(&w, s, n);
    h = (h ^ w) * 0x94d049bb133111ebull;
    return h ^ (h >> 29);
}

static size_t cc_set(uint64_t h) { return (h >> (64 - CC_BITS)) & ~(size_t)(CC_WAYS - 1); }

/* The hash of chunk s[0..n) (0: not cached), its slot prefetched when its tag is there, so that
 * the memory read overlaps the work on the chunk before it. */
static uint64_t cc_prefetch(const char *s, size_t n)
{
    if (n == 0 || n > CC_MAXLEN) return 0;
    const uint64_t h = cc_hash(s, n);
    if (cc_table) {
        const size_t set = cc_set(h);
        for (int k = 0; k < CC_WAYS; k++)
            if (cc_table->tag[set + k] == static_cast<uint16_t>(h)) {
                const char *e = reinterpret_cast<const char *>(&cc_table->slot[set + k]);
                __builtin_prefetch(e);
                __builtin_prefetch(e + sizeof(cc_slot) - 1);
            }
    }
    return h;
}

/* Appends Encode(chunk) to v, through the cache; h: cc_prefetch's hash of it. */
static sentencepiece::util::Status encode_chunk(const mc_spm_t *sp, const char *s, size_t n,
                                                uint64_t h, std::vector<int> *v)
{
    cc_slot *slot = nullptr;
    uint16_t *tag = nullptr, t = 0;
    if (n <= CC_MAXLEN) {
        if (!cc_table) {
            cc_table.reset(static_cast<cc_table_t *>(std::calloc(1, sizeof(cc_table_t))));
            if (!cc_table) throw std::bad_alloc();
        }
        // CC_WAYS slots per hash, newest first: a miss shifts them and fills the first
        const size_t set = cc_set(h);
        tag = &cc_table->tag[set];
        slot = &cc_table->slot[set];
        t = static_cast<uint16_t>(h);
        for (int k = 0; k < CC_WAYS; k++) {
            const cc_slot *e = &slot[k];
            if (tag[k] == t && e->gen == sp->gen && e->len == n &&
                std::memcmp(e->bytes, s, n) == 0) {
                v->insert(v->end(), e->ids, e->ids + e->nids);
                return sentencepiece::util::Status();
            }
        }
    }
    std::vector<int> w;
    const auto st = sp->proc.Encode(std::string_view(s, n), &w);
    if (!st.ok()) return st;
    v->insert(v->end(), w.begin(), w.end());
    if (slot && w.size() <= CC_MAXIDS) {
        std::memmove(slot + 1, slot, (CC_WAYS - 1) * sizeof(cc_slot));
        std::memmove(tag + 1, tag, (CC_WAYS - 1) * sizeof(uint16_t));
        tag[0] = t;
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
    // a text with k spaces has k + 1 chunks, empty ones included; the next chunk's slot is
    // prefetched while this one is encoded
    size_t at = 0, end = std::min(text.find(' '), text.size());
    uint64_t h = cc_prefetch(text.data(), end);
    for (;;) {
        const bool last = end == text.size();
        size_t next = end + 1, next_end = 0;
        uint64_t next_h = 0;
        if (!last) {
            next_end = std::min(text.find(' ', next), text.size());
            next_h = cc_prefetch(text.data() + next, next_end - next);
        }
        if (end > at) {
            const auto st = encode_chunk(sp, text.data() + at, end - at, h, v);
            if (!st.ok()) return st;
        } else {
            v->insert(v->end(), sp->empty_chunk.begin(), sp->empty_chunk.end());
        }
        if (last) break;
        at = next;
        end = next_end;
        h = next_h;
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
