#!/usr/bin/env bash
# megatron-c preprocess-data (Megatron's tools/preprocess_data.py): byte-identical output to
# Megatron's on tinyshakespeare (plain and .gz, any --workers, --partitions), --append-eod,
# --max-documents, --json-keys, NullTokenizer, malformed lines, flag errors, and no files left
# behind after an error.
# ci-sanitize: JSON lines, the tokenizers and the .bin/.idx writer, several workers
source "$(dirname "$0")/lib.sh"

: "${MEGATRON_C_SHARED:=$(cd "$(dirname "$0")/../.." && pwd)/../shared}"
SH=$MEGATRON_C_SHARED
REF=$SH/data/megatron-ref/tinyshakespeare_text_document
JSONL=$SH/data/text/tinyshakespeare.jsonl
GPT2=(--tokenizer-type GPT2BPETokenizer --vocab-file "$SH/data/gpt2/gpt2-vocab.json"
      --merge-file "$SH/data/gpt2/gpt2-merges.txt")
NULL=(--tokenizer-type NullTokenizer --vocab-size 1000)
PP=("$MC_BIN" preprocess-data)

# u64 / u32 at a byte offset of a file (little-endian, as the .idx is written).
u64() { od -An -tu8 -j "$2" -N 8 "$1" | tr -d ' '; }
u8() { od -An -tu1 -j "$2" -N 1 "$1" | tr -d ' '; }
# No file of a run is left: nothing at the final names, no temporary files.
no_files() { # dir
    [ -z "$(ls -A "$1")" ]
}

# le VALUE BYTES: VALUE as BYTES little-endian bytes.
le() {
    local v=$1 n=$2 i
    for ((i = 0; i < n; i++)); do printf "\\$(printf %03o $(((v >> (8 * i)) & 255)))"; done
}
# expected_idx DTYPE ITEMSIZE "LENS" "DOCIDX": the .idx Megatron writes for those arrays.
expected_idx() {
    local dtype=$1 size=$2 lens=($3) docs=($4) l p=0
    printf 'MMIDIDX\0\0'
    le 1 8
    le "$dtype" 1
    le ${#lens[@]} 8
    le ${#docs[@]} 8
    for l in "${lens[@]}"; do le "$l" 4; done
    for l in "${lens[@]}"; do le $p 8; p=$((p + l * size)); done
    for l in "${docs[@]}"; do le "$l" 8; done
}
expected_bin() { # ITEMSIZE tokens...
    local size=$1 t
    shift
    for t in "$@"; do le "$t" "$size"; done
}

# ---- flags ----
expect_user_error "missing required flags are named together" \
    'the following arguments are required: --input, --output-prefix, --workers, --tokenizer-type' \
    preprocess-data
expect_user_error "missing --workers" 'required: --workers$' \
    preprocess-data --input x.jsonl --output-prefix "$MC_TMP/o" "${NULL[@]}"
expect_user_error "unknown flag suggests the closest" 'unrecognized argument --output-prefx \(did you mean --output-prefix\?\)' \
    preprocess-data --input x --output-prefx "$MC_TMP/o" --workers 1 "${NULL[@]}"
expect_user_error "ambiguous abbreviation" 'ambiguous option: --vocab could match --vocab-file, --vocab-size, --vocab-extra-ids$' \
    preprocess-data --input x --output-prefix "$MC_TMP/o" --workers 1 --tokenizer-type NullTokenizer --vocab 10
expect_user_error "--workers must be divisible by --partitions" 'workers \(3\) must be divisible by --partitions \(2\)' \
    preprocess-data --input x --output-prefix "$MC_TMP/o" --workers 3 --partitions 2 "${NULL[@]}"
expect_user_error "--workers 0 refused" '--workers must be >= 1' \
    preprocess-data --input x --output-prefix "$MC_TMP/o" --workers 0 "${NULL[@]}"
expect_user_error "--workers takes an int" "argument --workers: invalid int value: 'two'" \
    preprocess-data --input x --output-prefix "$MC_TMP/o" --workers two "${NULL[@]}"
expect_user_error "--split-sentences not implemented yet" '--split-sentences is not implemented yet' \
    preprocess-data --input x --output-prefix "$MC_TMP/o" --workers 1 "${NULL[@]}" --split-sentences
expect_user_error "--keep-newlines not implemented yet" '--keep-newlines is not implemented yet' \
    preprocess-data --input x --output-prefix "$MC_TMP/o" --workers 1 "${NULL[@]}" --keep-newlines
expect_user_error "--find-optimal-num-workers not implemented yet" 'find-optimal-num-workers is not implemented yet' \
    preprocess-data --input x --output-prefix "$MC_TMP/o" --workers 1 "${NULL[@]}" --find-optimal-num-workers
expect_user_error "invalid tokenizer type" "invalid choice: 'GPT2BPE' \(did you mean GPT2BPETokenizer\?\)" \
    preprocess-data --input x --output-prefix "$MC_TMP/o" --workers 1 --tokenizer-type GPT2BPE
expect_user_error "tokenizer type not implemented yet" 'BertWordPieceCase is not implemented yet' \
    preprocess-data --input x --output-prefix "$MC_TMP/o" --workers 1 --tokenizer-type BertWordPieceCase
expect_user_error "GPT2BPETokenizer needs its files" 'needs --vocab-file and --merge-file' \
    preprocess-data --input x --output-prefix "$MC_TMP/o" --workers 1 --tokenizer-type GPT2BPETokenizer
expect_user_error "NullTokenizer needs --vocab-size" 'NullTokenizer needs --vocab-size' \
    preprocess-data --input x --output-prefix "$MC_TMP/o" --workers 1 --tokenizer-type NullTokenizer
expect_user_error "missing input file" 'cannot open --input .*nope.jsonl: No such file' \
    preprocess-data --input "$MC_TMP/nope.jsonl" --output-prefix "$MC_TMP/o" --workers 1 "${NULL[@]}"
"${PP[@]}" --help >"$MC_TMP/help" 2>&1
check "--help exits 0 and lists the flags" grep -q -- '--keep-sequential-samples' "$MC_TMP/help"

# ---- NullTokenizer: exact bytes ----
N=$MC_TMP/null
mkdir -p "$N/out"
printf '{"text": "1 2 3"}\n{"id": 5, "text": "7"}\n{"text": ["4 5", "6"]}\n{"text": []}\n{"text": "999"}' >"$N/in.jsonl"
"${PP[@]}" --input "$N/in.jsonl" --output-prefix "$N/out/n" --workers 2 "${NULL[@]}" --append-eod >"$N/log" 2>&1
check "NullTokenizer run exits 0" test $? -eq 0
expected_bin 2 1 2 3 1000 7 1000 4 5 6 1000 999 1000 >"$N/want.bin"
expected_idx 8 2 "4 2 2 2 2" "0 1 2 4 4 5" >"$N/want.idx"
check "NullTokenizer .bin (uint16, eod after the last sentence only)" cmp "$N/out/n_text_document.bin" "$N/want.bin"
check "NullTokenizer .idx (list values: one sequence per sentence; empty doc kept)" cmp "$N/out/n_text_document.idx" "$N/want.idx"
check "only the two output files are written" test "$(ls "$N/out" | tr '\n' ' ')" = "n_text_document.bin n_text_document.idx "

# vocab >= 65500: int32 tokens (dtype code 4).
rm -rf "$N/out"/*
"${PP[@]}" --input "$N/in.jsonl" --output-prefix "$N/out/n" --workers 1 --tokenizer-type NullTokenizer --vocab-size 70000 >/dev/null 2>&1
expected_bin 4 1 2 3 7 4 5 6 999 >"$N/want4.bin"
expected_idx 4 4 "3 1 2 1 1" "0 1 2 4 4 5" >"$N/want4.idx"
check "NullTokenizer with vocab 70000: int32 .bin" cmp "$N/out/n_text_document.bin" "$N/want4.bin"
check "NullTokenizer with vocab 70000: .idx, no eod without --append-eod" cmp "$N/out/n_text_document.idx" "$N/want4.idx"

# Several keys: one dataset per key; a repeated key is one output.
printf '{"a": "1 2", "b": "3"}\n{"a": "4", "b": "5 6 7"}\n' >"$N/ab.jsonl"
rm -rf "$N/out"/*
"${PP[@]}" --input "$N/ab.jsonl" --output-prefix "$N/out/m" --workers 2 "${NULL[@]}" --json-keys a b a >/dev/null 2>&1
expected_bin 2 1 2 4 >"$N/a.bin"
expected_bin 2 3 5 6 7 >"$N/b.bin"
check "--json-keys a b: a's tokens" cmp "$N/out/m_a_document.bin" "$N/a.bin"
check "--json-keys a b: b's tokens" cmp "$N/out/m_b_document.bin" "$N/b.bin"
check "--json-keys a b: b's index" cmp "$N/out/m_b_document.idx" <(expected_idx 8 2 "1 3" "0 1 2")
check "--json-keys a b a: two datasets" test "$(ls "$N/out" | wc -l)" -eq 4

# ---- malformed lines ----
M=$MC_TMP/mal
mkdir -p "$M/out"
printf '{"text": "1"}\n{"text": "2"}\n{"text": 3\n{"text": "4"}\n\n{"other": "5"}\n{"text": 6}\n{"text": "7"}\n' >"$M/in.jsonl"
"${PP[@]}" --input "$M/in.jsonl" --output-prefix "$M/out/m" --workers 2 "${NULL[@]}" >"$M/out.txt" 2>"$M/err"
rc=$?
check "malformed line: exit 2" test $rc -eq 2
check "malformed line: one stderr line naming file and line 3" \
    bash -c "[ \$(wc -l <'$M/err') -eq 1 ] && grep -qE '^megatron-c: error: .*in.jsonl, line 3: malformed JSON' '$M/err'"
check "malformed line: no output or temporary files" no_files "$M/out"

printf '{"text": "1"}\n\n{"text": "2"}\n' >"$M/blank.jsonl"
"${PP[@]}" --input "$M/blank.jsonl" --output-prefix "$M/out/b" --workers 1 "${NULL[@]}" >/dev/null 2>"$M/err"
check "a blank line is malformed (line 2)" grep -q 'blank.jsonl, line 2: blank line' "$M/err"
# A blank first line: the first chunk's text is still empty when the line ends (UBSan once
# aborted there on memcpy to NULL, leaving a .bin.tmp); the same one error as any bad line.
printf '\n{"text": "1"}\n' >"$M/blank1.jsonl"
"${PP[@]}" --input "$M/blank1.jsonl" --output-prefix "$M/out/b" --workers 1 "${NULL[@]}" >/dev/null 2>"$M/err"
rc=$?
check "a blank first line: exit 2" test $rc -eq 2
check "a blank first line: one error naming file and line 1" \
    bash -c "[ \$(wc -l <'$M/err') -eq 1 ] && grep -qE '^megatron-c: error: .*blank1.jsonl, line 1: blank line' '$M/err'"
check "a blank first line: no output or temporary files" no_files "$M/out"
printf '\n' >"$M/blank_only.jsonl"
"${PP[@]}" --input "$M/blank_only.jsonl" --output-prefix "$M/out/b" --workers 2 "${NULL[@]}" >/dev/null 2>"$M/err"
check "a file of one blank line: line 1 is malformed" grep -q 'blank_only.jsonl, line 1: blank line' "$M/err"
check "a file of one blank line: no files" no_files "$M/out"
printf '{"text": "1"}\n{"x": "2"}\n' >"$M/nokey.jsonl"
"${PP[@]}" --input "$M/nokey.jsonl" --output-prefix "$M/out/k" --workers 1 "${NULL[@]}" >/dev/null 2>"$M/err"
check "a missing key names the key and line 2" grep -q 'nokey.jsonl, line 2: no key "text"' "$M/err"
printf '{"text": 12}\n' >"$M/num.jsonl"
"${PP[@]}" --input "$M/num.jsonl" --output-prefix "$M/out/k" --workers 1 "${NULL[@]}" >/dev/null 2>"$M/err"
check "a non-string value is malformed" grep -q 'num.jsonl, line 1: "text" is a number, not a string' "$M/err"
check "no files after those errors" no_files "$M/out"

"${PP[@]}" --input "$M/in.jsonl" --output-prefix "$M/out/s" --workers 2 "${NULL[@]}" --skip-malformed >"$M/out.txt" 2>"$M/err"
check "--skip-malformed: exit 0" test $? -eq 0
check "--skip-malformed: reports the count and the first" grep -q 'warning: skipped 4 malformed lines (--skip-malformed); the first: .*in.jsonl, line 3' "$M/err"
check "--skip-malformed: the good lines, in order" cmp "$M/out/s_text_document.bin" <(expected_bin 2 1 2 4 7)

"${PP[@]}" --input "$M/in.jsonl" --output-prefix "$MC_TMP/no/such/dir/x" --workers 1 "${NULL[@]}" --skip-malformed >/dev/null 2>"$M/err"
rc=$?
check "unwritable output prefix: exit 2 with one line" bash -c "[ $rc -eq 2 ] && [ \$(wc -l <'$M/err') -eq 1 ] && grep -q '^megatron-c: error: ' '$M/err'"

# ---- Megatron's own output on tinyshakespeare ----
if [ ! -f "$REF.bin" ] || [ ! -f "$JSONL" ] || [ ! -f "$SH/data/gpt2/gpt2-vocab.json" ]; then
    skip "tinyshakespeare against Megatron's output" "no shared data at $SH (set MEGATRON_C_SHARED)"
    exit 0
fi
T=$MC_TMP/ts
mkdir -p "$T"
run() { # name, extra args...: runs into $T/<name>, output prefix $T/<name>/ts
    local name=$1
    shift
    mkdir -p "$T/$name"
    "${PP[@]}" --output-prefix "$T/$name/ts" "${GPT2[@]}" "$@" >"$T/$name.out" 2>"$T/$name.err"
}
same_as_ref() { # dir
    cmp "$T/$1/ts_text_document.bin" "$REF.bin" && cmp "$T/$1/ts_text_document.idx" "$REF.idx"
}

run w2 --input "$JSONL" --append-eod --workers 2
check "tinyshakespeare, --workers 2: exit 0" test $? -eq 0
check "tinyshakespeare, --workers 2: .bin and .idx byte-identical to Megatron's" same_as_ref w2
check "only the final files remain (no temporary files)" test "$(ls "$T/w2" | tr '\n' ' ')" = "ts_text_document.bin ts_text_document.idx "
check "progress every 1000 documents in Megatron's format" \
    test "$(grep -cE '^Processed [0-9]+000 documents \([0-9.e+-]+ docs/s, [0-9.e+-]+ MB/s\)\.$' "$T/w2.err")" -eq 7
check "the 'Opening' line" grep -q "^Opening $JSONL\$" "$T/w2.out"

run w1 --input "$JSONL" --append-eod --workers 1 --log-interval 100000
check "--workers 1: identical" same_as_ref w1
run w4 --input "$JSONL" --append-eod --workers 4 --legacy-tokenizer --json-keys text --log-interval 100000
check "--workers 4 (with --legacy-tokenizer, --json-keys text): identical" same_as_ref w4

gzip -c "$JSONL" >"$T/ts.jsonl.gz"
run gz --input "$T/ts.jsonl.gz" --append-eod --workers 2
check "through a .gz copy: identical" same_as_ref gz

run noeod --input "$JSONL" --workers 2
S=$(u64 "$REF.idx" 18)       # sequences = non-empty documents
D=$(u64 "$REF.idx" 26)
ref_tokens=$(($(stat -c %s "$REF.bin") / 2))
tokens=$(($(stat -c %s "$T/noeod/ts_text_document.bin") / 2))
check "without --append-eod: $ref_tokens - $S non-empty docs = $tokens tokens" test $tokens -eq $((ref_tokens - S))
check "without --append-eod: same document count" test "$(u64 "$T/noeod/ts_text_document.idx" 26)" = "$D"
check "dtype uint16 (code 8) for GPT-2" test "$(u8 "$T/noeod/ts_text_document.idx" 17)" = 8

run max --input "$JSONL" --append-eod --workers 2 --max-documents 100
check "--max-documents 100: 100 documents" test "$(u64 "$T/max/ts_text_document.idx" 26)" -eq 101
check "--max-documents 100: the first 100 of the full output" \
    cmp -n "$(stat -c %s "$T/max/ts_text_document.bin")" "$T/max/ts_text_document.bin" "$REF.bin"

# Two files, two partitions. --keep-sequential-samples keeps the order, so the result is the
# one-file output; the split point (line 1000) is not a partition boundary (line 3611).
mkdir -p "$T/in"
head -n 1000 "$JSONL" >"$T/in/part_a.jsonl"
tail -n +1001 "$JSONL" | gzip -c >"$T/in/part_b.jsonl.gz"
run p2seq --input "$T/in/part_*" --partitions 2 --workers 2 --append-eod --keep-sequential-samples
check "--partitions 2 --keep-sequential-samples on two files: identical to one file" same_as_ref p2seq
check "--partitions: the partition files are removed" test "$(ls "$T/p2seq" | tr '\n' ' ')" = "ts_text_document.bin ts_text_document.idx "
# Without it lines are dealt round-robin (Megatron's default): partition 0 has the odd lines.
awk 'NR % 2 == 1' "$JSONL" >"$T/rr.jsonl"
awk 'NR % 2 == 0' "$JSONL" >>"$T/rr.jsonl"
run rr --input "$T/rr.jsonl" --workers 2 --append-eod
run p2rr --input "$T/in/part_*" --partitions 2 --workers 2 --append-eod
check "--partitions 2 round-robin equals the dealt order" \
    bash -c "cmp '$T/p2rr/ts_text_document.bin' '$T/rr/ts_text_document.bin' && cmp '$T/p2rr/ts_text_document.idx' '$T/rr/ts_text_document.idx'"
expect_user_error "--partitions: a glob matching nothing" 'matched no files' \
    preprocess-data --input "$T/in/none_*" --partitions 2 --workers 2 --output-prefix "$T/x" "${GPT2[@]}"

# Empty text: a document without a sequence, and no eod.
printf '{"text": "Hello"}\n{"text": ""}\n{"text": " world"}\n' >"$T/empty.jsonl"
run empty --input "$T/empty.jsonl" --workers 1 --append-eod
check "empty document: 3 documents, 2 sequences" \
    test "$(u64 "$T/empty/ts_text_document.idx" 18) $(u64 "$T/empty/ts_text_document.idx" 26)" = "2 4"
check "empty document: tokens Hello eod ' world' eod" \
    cmp "$T/empty/ts_text_document.bin" <(expected_bin 2 15496 50256 995 50256)
