#!/usr/bin/env bash
# A short run of each fuzzer (scripts/fuzz.sh; test/fuzz/): a few seconds of mutated .idx files,
# torch.save files, flag lists and DCP .metadata files under the sanitizers, one TAP line each, plus the driver's
# self-test (a child's heap overflow must count as a failure). The sanitizer build is where
# they find things; the release build skips them.
# ci-sanitize: the fuzzers, whose findings are sanitizer reports (the release build skips them)
source "$(dirname "$0")/lib.sh"

: "${MC_BUILD:?MC_BUILD must point at the build folder}"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SECONDS_EACH=${MC_FUZZ_SECONDS:-6}
case $MC_BUILD in
*san*) ;;
*)
    for f in selftest idx pt flags dcp; do skip "fuzz $f" "the release build (run it with SANITIZE=1)"; done
    exit 0 ;;
esac
if [ ! -x "$MC_BUILD/test/fuzz/fuzz_idx" ]; then
    for f in selftest idx pt flags dcp; do skip "fuzz $f" "no fuzzers in $MC_BUILD"; done
    exit 0
fi
"$MC_BUILD/test/fuzz/fuzz_idx" --selftest >"$MC_TMP/self" 2>&1
check "fuzz selftest: a child's heap overflow is a failure" grep -q 'caught' "$MC_TMP/self"
for f in idx pt flags dcp; do
    MC_BUILD=$MC_BUILD bash "$ROOT/scripts/fuzz.sh" "$f" --seconds "$SECONDS_EACH" \
        --crashes "$MC_TMP/crashes" >"$MC_TMP/$f" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -qE "^fuzz $f: [0-9]+ inputs, 0 failing" "$MC_TMP/$f"; then
        ok "fuzz $f: $(grep -E "^fuzz $f:" "$MC_TMP/$f")"
    else
        not_ok "fuzz $f (rc=$rc): $(tr '\n' ' ' <"$MC_TMP/$f" | head -c 600)"
    fi
done
