#!/usr/bin/env bash
# Prints how many GPUs this process may use (scripts/gpu-test.sh, bench/bench.sh): those
# nvidia-smi lists, narrowed by CUDA_VISIBLE_DEVICES when it is set (empty or -1: none).
# 0 without nvidia-smi.
n=0
command -v nvidia-smi >/dev/null 2>&1 && n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "${CUDA_VISIBLE_DEVICES+set}" = set ]; then
    case "$CUDA_VISIBLE_DEVICES" in
    "" | -1*) n=0 ;;
    *)
        v=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
        [ "$v" -lt "$n" ] && n=$v
        ;;
    esac
fi
echo "$n"
