#!/usr/bin/env bash
# Training on Megatron indexed datasets (--data-path and friends) with the GPT-2 tokenizer files.
# ci-sanitize: indexed datasets and the index cache's .npy files read
source "$(dirname "$0")/lib.sh"

SHARED=${MEGATRON_C_SHARED:-../shared}
DATA=$SHARED/data/megatron-ref/tinyshakespeare_text_document
if [ ! -f "$DATA.idx" ]; then
    skip "training on indexed data" "no $DATA.idx (set MEGATRON_C_SHARED)"
    exit 0
fi
TOK=(--vocab-file "$SHARED/data/gpt2/gpt2-vocab.json" --merge-file "$SHARED/data/gpt2/gpt2-merges.txt")
MODEL=(--data-cache-path "$MC_TMP/cache" --device cpu --num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 32
       --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --train-iters 6
       --lr 3e-3 --lr-warmup-iters 1 --log-interval 2 --eval-interval 3 --eval-iters 1 --seed 7)

"$MC_BIN" "${MODEL[@]}" "${TOK[@]}" --data-path "$DATA" --split 90,8,2 >"$MC_TMP/run" 2>"$MC_TMP/err"
check "--data-path trains (exit 0)" test $? -eq 0
check "GPT-2 vocabulary padded as Megatron does" grep -q '^ > padded vocab (size: 50257) with 47 dummy tokens (new size: 50304)$' "$MC_TMP/run"
# seq 32, split 90,8,2 over 7222 documents: Megatron's GPTDataset lengths (sample_order_public.json)
check "dataset sizes logged" grep -qE '^> datasets: train [0-9]+, validation [0-9]+, test [0-9]+ samples of 32 tokens$' "$MC_TMP/run"
check "log line at iteration 6" grep -qE 'iteration +6/ +6 \| consumed samples: +24 \|' "$MC_TMP/run"
check "validation and test evaluated" grep -q 'validation loss at iteration 6 on test set' "$MC_TMP/run"

"$MC_BIN" "${MODEL[@]}" "${TOK[@]}" --data-path "$DATA" >"$MC_TMP/legacy" 2>"$MC_TMP/legacy.err"
check "no --split: legacy default with Megatron's warning" grep -q '969, 30, 1' "$MC_TMP/legacy.err"

"$MC_BIN" "${MODEL[@]}" "${TOK[@]}" --data-path 0.3 "$DATA" 0.7 "$DATA" --split 90,8,2 >"$MC_TMP/blend" 2>&1
check "weighted blend trains" grep -qE 'iteration +6/ +6' "$MC_TMP/blend"

"$MC_BIN" "${MODEL[@]}" "${TOK[@]}" --train-data-path "$DATA" --valid-data-path "$DATA" >"$MC_TMP/per" 2>&1
check "per-split paths train (no test split: no test evaluation)" bash -c "grep -qE 'iteration +6/ +6' '$MC_TMP/per' && ! grep -q 'on test set' '$MC_TMP/per'"

"$MC_BIN" "${MODEL[@]}" "${TOK[@]}" --data-path "$DATA" --split 90,8,2 --reset-position-ids --eod-mask-loss >"$MC_TMP/reset" 2>&1
check "--reset-position-ids --eod-mask-loss train" grep -qE 'iteration +6/ +6' "$MC_TMP/reset"

# Per-document attention: the same samples, a different mask, so different losses.
"$MC_BIN" "${MODEL[@]}" "${TOK[@]}" --data-path "$DATA" --split 90,8,2 --reset-attention-mask --log-interval 1 >"$MC_TMP/ram" 2>&1
"$MC_BIN" "${MODEL[@]}" "${TOK[@]}" --data-path "$DATA" --split 90,8,2 --log-interval 1 >"$MC_TMP/noram" 2>&1
lossat() { grep -E "iteration +$1/" "$2" | sed -E 's/.*lm loss: ([0-9.E+-]+) .*/\1/'; }
check "--reset-attention-mask trains" grep -qE 'iteration +6/ +6' "$MC_TMP/ram"
check "--reset-attention-mask changes the losses" test "$(lossat 6 "$MC_TMP/ram")" != "$(lossat 6 "$MC_TMP/noram")"

# Same flags, same samples: bit-identical losses.
"$MC_BIN" "${MODEL[@]}" "${TOK[@]}" --data-path "$DATA" --split 90,8,2 >"$MC_TMP/run2" 2>&1
strip() { grep -E 'lm loss' "$1" | sed -E 's/^ \[[^]]*\]//; s/elapsed time per iteration \(ms\): [0-9.]+ \|//'; }
check "deterministic on indexed data" diff <(strip "$MC_TMP/run") <(strip "$MC_TMP/run2")

expect_user_error "missing dataset names the file" 'nope' "${MODEL[@]}" "${TOK[@]}" --data-path "$MC_TMP/nope" --split 90,8,2
expect_user_error "missing vocab file names it" 'missing-vocab.json' "${MODEL[@]}" --vocab-file "$MC_TMP/missing-vocab.json" --merge-file "$SHARED/data/gpt2/gpt2-merges.txt" --data-path "$DATA" --split 90,8,2
expect_user_error "GPT-2 tokenizer without files" 'vocab' "${MODEL[@]}" --data-path "$DATA" --split 90,8,2
expect_user_error "mock and data path exclusive" 'mutually exclusive' "${MODEL[@]}" "${TOK[@]}" --mock-data --vocab-size 64 --data-path "$DATA"
# The vocabulary comes from the tokenizer when it has files, as in Megatron (its GPT-2 tokenizer
# never reads --vocab-size), for --mock-data too: 50257 ids padded to 50304.
PADDED='^ > padded vocab \(size: 50257\) with 47 dummy tokens \(new size: 50304\)$'
"$MC_BIN" "${MODEL[@]}" "${TOK[@]}" --mock-data >"$MC_TMP/mockgpt2" 2>"$MC_TMP/mockgpt2.err"
check "--mock-data with the GPT-2 files and no --vocab-size trains, on a 50257-id vocabulary" \
    bash -c "[ $? -eq 0 ] && [ ! -s '$MC_TMP/mockgpt2.err' ] && grep -qE '$PADDED' '$MC_TMP/mockgpt2' &&
             grep -qE 'iteration +6/ +6' '$MC_TMP/mockgpt2'"
"$MC_BIN" "${MODEL[@]}" "${TOK[@]}" --mock-data --vocab-size 512 >"$MC_TMP/mockgpt2v" 2>&1
check "--mock-data with the GPT-2 files: --vocab-size does not size the vocabulary" grep -qE "$PADDED" "$MC_TMP/mockgpt2v"
"$MC_BIN" "${MODEL[@]}" "${TOK[@]}" --data-path "$DATA" --split 90,8,2 --vocab-size 512 >"$MC_TMP/datav" 2>&1
check "--data-path with the GPT-2 files: --vocab-size does not size the vocabulary" \
    bash -c "grep -qE '$PADDED' '$MC_TMP/datav' && grep -qE 'iteration +6/ +6' '$MC_TMP/datav'"
"$MC_BIN" "${MODEL[@]}" --mock-data --vocab-size 2 >"$MC_TMP/mock2" 2>&1
check "--mock-data with a 2-id vocabulary trains (ids wrap as Megatron's)" grep -qE 'iteration +6/ +6' "$MC_TMP/mock2"
expect_user_error "--mock-data with a vocab file and no merge file" 'required: --merge-file$' \
    "${MODEL[@]}" --mock-data --vocab-file "$SHARED/data/gpt2/gpt2-vocab.json"
expect_user_error "--mock-data with a missing vocab file names it" "missing-vocab.json" \
    "${MODEL[@]}" --mock-data --vocab-file "$MC_TMP/missing-vocab.json" --merge-file "$SHARED/data/gpt2/gpt2-merges.txt"
printf 'MMIDIDX\0\0garbage' >"$MC_TMP/bad.idx"; : >"$MC_TMP/bad.bin"
expect_user_error "corrupt index names the file" 'bad.idx' "${MODEL[@]}" "${TOK[@]}" --data-path "$MC_TMP/bad" --split 90,8,2

# ---- the data's own mistakes: one line naming the file, the document and the id ----
# Token ids beyond the padded vocabulary (tinyshakespeare's GPT-2 ids under a 64-token
# NullTokenizer, padded to 128) and negative ones (the .idx's dtype byte says int8 over uint16
# tokens): Megatron's embedding raises IndexError on both.
NULLTOK=(--tokenizer-type NullTokenizer --vocab-size 64)
cp "$DATA.idx" "$MC_TMP/int8.idx"
ln -s "$DATA.bin" "$MC_TMP/int8.bin"
printf '\x02' | dd of="$MC_TMP/int8.idx" bs=1 seek=17 conv=notrunc 2>/dev/null
BADTOK='^megatron-c: error: .*tinyshakespeare_text_document\.bin: token id [0-9]+ at position [0-9]+ of document [0-9]+ .*outside the vocabulary \[0, 128\)'
NEGTOK='^megatron-c: error: .*int8\.bin: token id -[0-9]+ at position [0-9]+ of document [0-9]+ .*negative'
"$MC_BIN" "${MODEL[@]}" "${NULLTOK[@]}" --data-path "$DATA" --split 90,8,2 >"$MC_TMP/tok.out" 2>"$MC_TMP/tok.err"
rc=$?
check "ids beyond the padded vocabulary: exit 2" test $rc -eq 2
one_error_line "ids beyond the padded vocabulary: one line naming .bin, document, id" "$BADTOK" $rc "$MC_TMP/tok.err"
"$MC_BIN" "${MODEL[@]}" "${TOK[@]}" --data-path "$MC_TMP/int8" --split 90,8,2 >"$MC_TMP/neg.out" 2>"$MC_TMP/neg.err"
rc=$?
check "negative ids (int8 dtype): exit 2" test $rc -eq 2
one_error_line "negative ids (int8 dtype): one line naming .bin, document, id" "$NEGTOK" $rc "$MC_TMP/neg.err"
"$MC_BIN" inspect-data "${MODEL[@]}" "${TOK[@]}" --data-path "$MC_TMP/int8" --split 90,8,2 >"$MC_TMP/ins.out" 2>"$MC_TMP/ins.err"
rc=$?
check "inspect-data refuses negative ids too (exit 2)" test $rc -eq 2
one_error_line "inspect-data: one line naming .bin, document, id" "$NEGTOK" $rc "$MC_TMP/ins.err"
# Two ranks read different samples: the rank that meets the id reports it and ends the job
# (the other may report its own before it goes); nothing hangs.
source "$(dirname "$0")/mpi.sh"
if have_mpirun; then
    mpirun_mc 2 "${MODEL[@]}" "${NULLTOK[@]}" --data-path "$DATA" --split 90,8,2 >"$MC_TMP/tok2.out" 2>"$MC_TMP/tok2.err"
    rc=$?
    lines=$(grep -c '^megatron-c: ' "$MC_TMP/tok2.err")
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$lines" -ge 1 ] &&
        [ "$(grep -cE "$BADTOK" "$MC_TMP/tok2.err")" -eq "$lines" ]; then
        ok "2 ranks: bad ids end the job with the error line, no hang"
    else
        not_ok "2 ranks: bad ids end the job (rc=$rc, stderr: $(head -c 400 "$MC_TMP/tok2.err"))"
    fi
else
    skip "2 ranks: bad ids end the job" "no mpirun"
fi

# ---- blend and split mistakes: usage errors naming the flag ----
expect_user_error "blend weights all zero" "--data-path: the weight 0 of '.*' is not a positive finite number" \
    "${MODEL[@]}" "${TOK[@]}" --data-path 0 "$DATA" 0 "$DATA" --split 90,8,2
expect_user_error "blend weight NaN" "--data-path: the weight nan of" \
    "${MODEL[@]}" "${TOK[@]}" --data-path nan "$DATA" 1 "$DATA" --split 90,8,2
expect_user_error "blend weight inf" "--data-path: the weight inf of" \
    "${MODEL[@]}" "${TOK[@]}" --data-path inf "$DATA" 1 "$DATA" --split 90,8,2
expect_user_error "--mid-level-dataset-surplus 1e300" "--mid-level-dataset-surplus 1e\+300: .* \(give a small surplus" \
    "${MODEL[@]}" "${TOK[@]}" --data-path 1 "$DATA" 1 "$DATA" --split 90,8,2 --mid-level-dataset-surplus 1e300
expect_user_error "--split with no train part" "--split '0,100,0' leaves the train split empty, but training needs 24 samples" \
    "${MODEL[@]}" "${TOK[@]}" --data-path "$DATA" --split 0,100,0
