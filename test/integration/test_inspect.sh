#!/usr/bin/env bash
# megatron-c inspect-data against Megatron's own GPTDataset and MegatronPretrainingSampler on
# tinyshakespeare (data/megatron-ref/sample_order_public.json, config "p"): split lengths, the
# ids of samples 0..49, 1000, 5000 and the last of every split, their sha256, the decoded text,
# the sampler's indices per DP rank; then --mock-data, the defaults, and option errors.
source "$(dirname "$0")/lib.sh"

: "${MEGATRON_C_SHARED:=$(cd "$(dirname "$0")/../.." && pwd)/../shared}"
SH=$MEGATRON_C_SHARED
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
REFJSON=$SH/data/megatron-ref/sample_order_public.json
PREFIX=$SH/data/megatron-ref/tinyshakespeare_text_document
VOCAB=$SH/data/gpt2/gpt2-vocab.json
MERGES=$SH/data/gpt2/gpt2-merges.txt
INSPECT=("$MC_BIN" inspect-data)
MOCK=(--mock-data --vocab-size 512 --seq-length 16 --train-iters 10 --global-batch-size 4
      --eval-interval 5 --eval-iters 1)

# ---- options that fail before any data is read ----
expect_user_error "bad --split-name" "argument --split-name: invalid choice: 'training' \(choose from train, valid, test\)" \
    inspect-data "${MOCK[@]}" --split-name training
expect_user_error "bad --format" "argument --format: invalid choice: 'hex' \(choose from ids, text, sha256\)" \
    inspect-data "${MOCK[@]}" --format hex
expect_user_error "--samples without a colon" "argument --samples: invalid value '5' \(expected A:B" \
    inspect-data "${MOCK[@]}" --samples 5
expect_user_error "--samples with a negative bound" "argument --samples: invalid value '-1:3'" \
    inspect-data "${MOCK[@]}" --samples=-1:3
expect_user_error "--samples A > B" "A must not exceed B" \
    inspect-data "${MOCK[@]}" --samples 5:3
expect_user_error "--samples needs a value" "argument --samples: expected one argument" \
    inspect-data "${MOCK[@]}" --samples
expect_user_error "--iteration takes an integer" "argument --iteration: invalid int value: 'x'" \
    inspect-data "${MOCK[@]}" --micro-batch-size 1 --iteration x
expect_user_error "--data-parallel-size 0" "argument --data-parallel-size: invalid value '0'" \
    inspect-data "${MOCK[@]}" --data-parallel-size 0
expect_user_error "--data-parallel-rank needs --iteration" "--data-parallel-rank needs --iteration" \
    inspect-data "${MOCK[@]}" --data-parallel-size 2 --data-parallel-rank 1
expect_user_error "--data-parallel-rank below the size" "--data-parallel-rank \(2\) must be less than --data-parallel-size \(2\)" \
    inspect-data "${MOCK[@]}" --micro-batch-size 1 --data-parallel-size 2 --data-parallel-rank 2 --iteration 0
expect_user_error "--iteration excludes --format" "--samples and --format do not apply" \
    inspect-data "${MOCK[@]}" --micro-batch-size 1 --iteration 0 --format sha256
expect_user_error "--iteration is for the train split" "--iteration is for the train split" \
    inspect-data "${MOCK[@]}" --micro-batch-size 1 --iteration 0 --split-name valid
expect_user_error "--iteration needs --micro-batch-size" "--iteration needs --micro-batch-size" \
    inspect-data "${MOCK[@]}" --iteration 0
expect_user_error "--iteration past training" "--iteration 10 is past the end of training" \
    inspect-data "${MOCK[@]}" --micro-batch-size 1 --iteration 10
expect_user_error "training flags are still checked" "unrecognized argument --seq-lenght" \
    inspect-data --mock-data --vocab-size 512 --seq-lenght 16 --train-iters 10
expect_user_error "gbs divisible by mbs x dp, as in training" "global batch size \(4\) is not divisible by micro batch size \(1\) times data parallel size \(3\)" \
    inspect-data "${MOCK[@]}" --micro-batch-size 1 --data-parallel-size 3 --iteration 0
expect_user_error "text needs a tokenizer" "--format text needs a tokenizer.*--mock-data" \
    inspect-data "${MOCK[@]}" --format text
expect_user_error "mock: --samples past the end of the split" "--samples 4261893:4261894 is out of range: the train split has 4261893 samples" \
    inspect-data "${MOCK[@]}" --samples 4261893:4261894

"${INSPECT[@]}" --help >"$MC_TMP/help" 2>&1
help_ok() {
    local o
    for o in --split-name --samples --format --data-parallel-size --data-parallel-rank --iteration \
        'backslash written as \\' 'newline as \n'; do
        grep -qF -- "$o" "$MC_TMP/help" || return 1
    done
}
check "--help exits 0 and names every option and the escapes" help_ok

# ---- --mock-data ----
# Megatron's MockGPTDatasets (test/ref/megatron_mock.py SEQ 16 SEED 1234 VOCAB 512 EOD 511 sizes
# 40,12,4): 100000 documents split 1,1,1 whatever --split says, indexed with --seed.
MOCK_HEADER="# samples: train=4261893 valid=4259983 test=4267941"
"${INSPECT[@]}" "${MOCK[@]}" >"$MC_TMP/mock" 2>"$MC_TMP/mock.err"
check "mock: Megatron's split lengths, then 10 samples of 17 ids by default" \
    bash -c '[ "$(head -1 "$1")" = "$2" ] &&
             [ "$(wc -l <"$1")" -eq 11 ] &&
             tail -n +2 "$1" | awk -F"\t" -v n=0 "\$1 != n++ || split(\$2, a, \" \") != 17 { exit 1 }"' _ "$MC_TMP/mock" "$MOCK_HEADER"
check "mock: train sample 0 is Megatron's" \
    bash -c '[ "$(sed -n 2p "$1")" = "$(printf "0\t55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71")" ]' _ "$MC_TMP/mock"
"${INSPECT[@]}" "${MOCK[@]}" --split-name valid --format sha256 --samples 4259982:4259983 >"$MC_TMP/mockv"
check "mock: the last valid sample's sha256 is Megatron's" \
    grep -qx "$(printf '4259982\t671055e776276521d39e46a25d12ca698cb03496ee4d802e631511e705e964f2')" "$MC_TMP/mockv"
"${INSPECT[@]}" "${MOCK[@]}" --split-name test --format sha256 --samples 1000:1001 --split 90,8,2 >"$MC_TMP/mockt" 2>"$MC_TMP/mockt.err"
check "mock: --split is ignored, as by Megatron, with a warning naming it" \
    bash -c '[ "$(head -1 "$1")" = "$3" ] &&
             grep -qx "$(printf "1000\tcb906f07bdbaa143eac4211e5fb2c99dee5731fcbb68f243bbd3f5ea4382717e")" "$1" &&
             grep -q "warning: --split is ignored with --mock-data" "$2"' _ "$MC_TMP/mockt" "$MC_TMP/mockt.err" "$MOCK_HEADER"
"${INSPECT[@]}" "${MOCK[@]}" --samples 3:5 --split-name test >"$MC_TMP/mock35"
"${INSPECT[@]}" "${MOCK[@]}" --samples 0:10 --split-name test >"$MC_TMP/mock010"
check "mock: --samples 3:5 are lines 3 and 4 of 0:10" \
    bash -c 'diff <(tail -n +2 "$1") <(sed -n 5,6p "$2") >/dev/null' _ "$MC_TMP/mock35" "$MC_TMP/mock010"
"${INSPECT[@]}" "${MOCK[@]}" --micro-batch-size 1 --data-parallel-size 2 --data-parallel-rank 1 --iteration 9 >"$MC_TMP/mocks"
check "mock: sampler lines (mbs 1, dp 2, gbs 4, rank 1, iteration 9)" \
    bash -c 'diff <(tail -n +2 "$1") <(printf "0\t37\n1\t39\n") >/dev/null' _ "$MC_TMP/mocks"

# ---- against Megatron ----
if [ ! -f "$REFJSON" ] || [ ! -f "$PREFIX.idx" ] || [ ! -f "$VOCAB" ]; then
    skip "Megatron reference comparisons" "no $REFJSON (or its dataset or GPT-2 files; set MEGATRON_C_SHARED)"
    exit 0
fi

# Config p's megatron-c flags (from the JSON), with the prefix and GPT-2 files made absolute.
read -r -a FLAGS < <($PY - "$REFJSON" "$PREFIX" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))["configs"]["p"]
print(p["megatron_c_flags"].replace("tinyshakespeare_text_document", sys.argv[2]))
EOF
)
# The index cache goes to the test's directory, not beside the shared dataset.
FLAGS+=(--tokenizer-type GPT2BPETokenizer --vocab-file "$VOCAB" --merge-file "$MERGES"
        --data-cache-path "$MC_TMP/cache")

# The expected lines, per split: ids, sha256 and escaped text of every reference sample, from
# the reference's tokens + labels_last; the sampler's fresh_start lists; the header.
$PY - "$REFJSON" "$MC_TMP" "$ROOT/test/ref" <<'EOF'
import hashlib, json, os, struct, sys
ref, out, refdir = sys.argv[1], sys.argv[2], sys.argv[3]
p = json.load(open(ref))["configs"]["p"]
sys.path.insert(0, refdir)
try:
    import gpt2_tokenizer_ref
    tok = gpt2_tokenizer_ref.load_ref()
except Exception as e:  # python3-regex missing: no text comparison
    print("no GPT-2 reference tokenizer: %s" % e, file=sys.stderr)
    tok = None
lens = {}
for split in ("train", "valid", "test"):
    s = p["splits"][split]
    lens[split] = s["len"] if s else 0
    if not s:
        continue
    ids_f = open(os.path.join(out, "ref.%s.ids" % split), "w")
    sha_f = open(os.path.join(out, "ref.%s.sha256" % split), "w")
    txt_f = open(os.path.join(out, "ref.%s.text" % split), "wb") if tok else None
    for smp in s["samples"]:
        ids = smp["tokens"] + [smp["labels_last"]]
        assert hashlib.sha256(struct.pack("<%dq" % (len(ids) - 1), *ids[:-1])).hexdigest() == smp["tokens_sha256"]
        i = smp["idx"]
        ids_f.write("%d\t%s\n" % (i, " ".join(map(str, ids))))
        sha_f.write("%d\t%s\n" % (i, hashlib.sha256(struct.pack("<%dq" % len(ids), *ids)).hexdigest()))
        if txt_f:
            b = tok.decode_bytes(ids).replace(b"\\", b"\\\\").replace(b"\n", b"\\n")
            txt_f.write(b"%d\t%s\n" % (i, b))
with open(os.path.join(out, "ref.header"), "w") as f:
    f.write("# samples: train=%d valid=%d test=%d\n" % (lens["train"], lens["valid"], lens["test"]))
sm = p["sampler"]
with open(os.path.join(out, "ref.sampler"), "w") as f:
    f.write("%d %d %d %d %d\n" % (sm["micro_batch_size"], sm["global_batch_size"],
            sm["data_parallel_size"], sm["iteration_0based"], sm["total_samples (len(train_ds))"]))
for r in range(sm["data_parallel_size"]):
    with open(os.path.join(out, "ref.sampler.%d" % r), "w") as f:
        for m, idx in enumerate(sm["fresh_start"]["dp_rank_%d" % r]):
            f.write("%d\t%s\n" % (m, " ".join(map(str, idx))))
EOF

# The reference samples of a split as inspect-data lines: 0:50 then each later index alone.
inspect_ref_samples() { # split format out
    local split=$1 fmt=$2 out=$3 i
    {
        "${INSPECT[@]}" "${FLAGS[@]}" --split-name "$split" --format "$fmt" --samples 0:50 | tail -n +2
        for i in $(cut -f1 "$MC_TMP/ref.$split.ids" | awk '$1 >= 50'); do
            "${INSPECT[@]}" "${FLAGS[@]}" --split-name "$split" --format "$fmt" --samples "$i:$((i + 1))" | tail -n +2
        done
    } >"$out"
}

"${INSPECT[@]}" "${FLAGS[@]}" >"$MC_TMP/default" 2>"$MC_TMP/default.err"
check "header: Megatron's split lengths ($(head -c 60 "$MC_TMP/ref.header"))" \
    bash -c '[ "$(head -1 "$1")" = "$(cat "$2")" ]' _ "$MC_TMP/default" "$MC_TMP/ref.header"
check "default: samples 0:10 as ids" \
    bash -c '[ "$(wc -l <"$1")" -eq 11 ] && diff <(tail -n +2 "$1") <(head -10 "$2") >/dev/null' _ "$MC_TMP/default" "$MC_TMP/ref.train.ids"

for split in train valid test; do
    inspect_ref_samples $split ids "$MC_TMP/got.$split.ids"
    check "$split: ids of samples 0..49, 1000, 5000, last = Megatron's tokens + labels_last" \
        diff -q "$MC_TMP/got.$split.ids" "$MC_TMP/ref.$split.ids"
    inspect_ref_samples $split sha256 "$MC_TMP/got.$split.sha256"
    check "$split: sha256 = sha256 of the ids as int64 LE" \
        diff -q "$MC_TMP/got.$split.sha256" "$MC_TMP/ref.$split.sha256"
done
if [ -f "$MC_TMP/ref.train.text" ]; then
    "${INSPECT[@]}" "${FLAGS[@]}" --format text --samples 0:50 | tail -n +2 >"$MC_TMP/got.train.text"
    check "train: text of samples 0..49 = the reference GPT-2 decode, escaped" \
        diff -q "$MC_TMP/got.train.text" <(head -50 "$MC_TMP/ref.train.text")
    inspect_ref_samples valid text "$MC_TMP/got.valid.text"
    check "valid: text of the reference samples" diff -q "$MC_TMP/got.valid.text" "$MC_TMP/ref.valid.text"
else
    skip "text against the reference decode" "test/ref/gpt2_tokenizer_ref.py needs python3-regex"
fi
"${INSPECT[@]}" "${FLAGS[@]}" --format text --samples 0:50 | tail -n +2 >"$MC_TMP/got.text"
check "text: one line per sample, backslashes and newlines escaped" \
    bash -c '[ "$(wc -l <"$1")" -eq 50 ] && grep -q "\\\\n" "$1"' _ "$MC_TMP/got.text"

read -r MBS GBS DP IT TOTAL <"$MC_TMP/ref.sampler"
for ((r = 0; r < DP; r++)); do
    "${INSPECT[@]}" "${FLAGS[@]}" --micro-batch-size "$MBS" --global-batch-size "$GBS" \
        --data-parallel-size "$DP" --data-parallel-rank "$r" --iteration "$IT" >"$MC_TMP/got.sampler.$r"
    check "sampler: iteration $IT, dp rank $r of $DP (mbs $MBS, gbs $GBS) = Megatron's" \
        diff -q <(tail -n +2 "$MC_TMP/got.sampler.$r") "$MC_TMP/ref.sampler.$r"
done
check "sampler: header line too" \
    bash -c '[ "$(head -1 "$1")" = "$(cat "$2")" ]' _ "$MC_TMP/got.sampler.0" "$MC_TMP/ref.header"

# The whole training command line gives the same datasets as the data flags alone.
"${INSPECT[@]}" "${FLAGS[@]}" --num-layers 2 --hidden-size 64 --num-attention-heads 4 \
    --max-position-embeddings 64 --micro-batch-size 2 --lr 1e-3 --min-lr 1e-4 \
    --lr-decay-style cosine --samples 5000:5001 --format sha256 >"$MC_TMP/full"
check "training's full command line: same header and samples" \
    bash -c 'diff <(head -1 "$1") "$2" >/dev/null && diff <(tail -n +2 "$1") <(grep "^5000	" "$3") >/dev/null' \
    _ "$MC_TMP/full" "$MC_TMP/ref.header" "$MC_TMP/ref.train.sha256"

# --data-parallel-size sets the default global batch size (mbs x dp), hence the split sizes
# (--train-iters 5000 asks for several epochs, so the lengths follow the sample count).
NOGBS=()
for ((i = 0; i < ${#FLAGS[@]}; i++)); do
    if [ "${FLAGS[i]}" = --global-batch-size ]; then i=$((i + 1)); else NOGBS+=("${FLAGS[i]}"); fi
done
hdr() { "${INSPECT[@]}" "$@" --train-iters 5000 --samples 0:0 2>/dev/null | head -1; }
H_DP4=$(hdr "${NOGBS[@]}" --micro-batch-size 4 --data-parallel-size 4)
H_DP1=$(hdr "${NOGBS[@]}" --micro-batch-size 4)
H_16=$(hdr "${NOGBS[@]}" --global-batch-size 16)
check "--data-parallel-size: default gbs = mbs x dp decides the split sizes ($H_DP4 / $H_DP1)" \
    bash -c '[ -n "$1" ] && [ "$1" = "$2" ] && [ "$1" != "$3" ]' _ "$H_DP4" "$H_16" "$H_DP1"

N=$(head -1 "$MC_TMP/ref.header" | sed 's/.*train=\([0-9]*\).*/\1/')
expect_user_error "--samples past the split names its length" "--samples 0:$((N + 1)) is out of range: the train split has $N samples" \
    inspect-data "${FLAGS[@]}" --samples "0:$((N + 1))"
"${INSPECT[@]}" "${FLAGS[@]}" --samples "$((N - 1)):" --format sha256 >"$MC_TMP/tail"
check "--samples A: runs to the end" \
    bash -c '[ "$(wc -l <"$1")" -eq 2 ] && diff <(tail -n +2 "$1") <(grep "^$3	" "$2") >/dev/null' \
    _ "$MC_TMP/tail" "$MC_TMP/ref.train.sha256" "$((N - 1))"
expect_user_error "--iteration past the data" "--iteration 500 is past the end of training" \
    inspect-data "${FLAGS[@]}" --micro-batch-size 2 --iteration 500
expect_user_error "text: an id outside the tokenizer, before any output" "sample 0 of the train split holds id [0-9]+, outside the tokenizer's vocabulary of 11 ids" \
    inspect-data "${FLAGS[@]}" --tokenizer-type NullTokenizer --vocab-size 10 --format text
expect_user_error "missing dataset file" "nope" \
    inspect-data "${FLAGS[@]/$PREFIX/$MC_TMP/nope}"

# ---- --fim-data: Megatron's GPTFIMDataset (test/ref/fim_ref.py) on the same samples ----
# GPT-2's vocabulary with the FIM tokens appended (ids 50257..50260), as FIM vocabularies have.
$PY - "$VOCAB" "$MC_TMP/fim-vocab.json" <<'EOF2'
import json, sys
v = json.load(open(sys.argv[1]))
for t in ("<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<fim_pad>"):
    v[t] = len(v)
json.dump(v, open(sys.argv[2], "w"))
EOF2
# --fim-no-prefix $'\n': 47 fragments of these samples start with a newline and stay as they are.
FIM=("${FLAGS[@]}" --vocab-file "$MC_TMP/fim-vocab.json" --format ids --samples 0:300)
"${INSPECT[@]}" "${FIM[@]}" >"$MC_TMP/fim.raw"
"${INSPECT[@]}" "${FIM[@]}" --fim-data --fim-rate 0.7 --fim-spm-rate 0.4 >"$MC_TMP/fim.got"
"${INSPECT[@]}" "${FIM[@]}" --fim-data --fim-rate 0.9 --fim-spm-rate 0.5 --fim-split-sample . \
    --fim-fragment-rate 0.6 --fim-no-prefix $'\n' >"$MC_TMP/fim.split"
SEED=$(printf '%s\n' "${FLAGS[@]}" | grep -A1 -x -- --seed | tail -1)
if [ -f "$MC_TMP/ref.train.text" ]; then
    check "fim: 300 samples = Megatron's GPTFIMDataset (rate 0.7, spm 0.4)" \
        $PY "$ROOT/test/ref/fim_ref.py" "$MC_TMP/fim-vocab.json" "$MERGES" "$MC_TMP/fim.raw" \
        "$MC_TMP/fim.got" --rate 0.7 --spm-rate 0.4 --seed "$SEED"
    check "fim: with --fim-split-sample, --fim-fragment-rate, --fim-no-prefix" \
        $PY "$ROOT/test/ref/fim_ref.py" "$MC_TMP/fim-vocab.json" "$MERGES" "$MC_TMP/fim.raw" \
        "$MC_TMP/fim.split" --rate 0.9 --spm-rate 0.5 --split-sample . --fragment-rate 0.6 \
        --no-prefix $'\n' --seed "$SEED"
else
    skip "fim against the reference" "test/ref/gpt2_tokenizer_ref.py needs python3-regex"
fi
expect_user_error "fim: a tokenizer without the FIM tokens" "--fim-prefix-token '<fim_prefix>': the tokenizer's vocabulary has no such token" \
    inspect-data "${FLAGS[@]}" --fim-data
expect_user_error "fim: a rate outside [0, 1]" "--fim-rate 1.5: not a probability" \
    inspect-data "${FIM[@]}" --fim-data --fim-rate 1.5
expect_user_error "fim: --fim-spm-rate 0 (Megatron asserts)" "--fim-spm-rate 0: Megatron asserts" \
    inspect-data "${FIM[@]}" --fim-data --fim-spm-rate 0
expect_user_error "fim: --fim-split-sample needs --fim-fragment-rate" "--fim-split-sample needs --fim-fragment-rate" \
    inspect-data "${FIM[@]}" --fim-data --fim-split-sample .
expect_user_error "fim: not with --legacy-tokenizer (Megatron fails)" "--fim-data with --legacy-tokenizer" \
    inspect-data "${FIM[@]}" --fim-data --legacy-tokenizer
expect_user_error "fim: other tokenizers not yet" "--fim-data is implemented for --tokenizer-type GPT2BPETokenizer only" \
    inspect-data "${FLAGS[@]}" --tokenizer-type NullTokenizer --vocab-size 60000 --fim-data
