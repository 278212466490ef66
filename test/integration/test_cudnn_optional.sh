#!/usr/bin/env bash
# cuDNN is optional (issue 29): a CUDA build on a machine without cuDNN's header and library under
# CUDNN_HOME builds without them and runs the project's attention kernels, saying so at start-up.
# Checked without building a tree: the Makefile's plans (make -n) for CUDNN_HOME with and without
# cuDNN, and the files that use cuDNN compiled without it (g++ with the emulated device's flags,
# -Wall -Wextra -Werror, as nvcc -Werror sees them). The start-up line itself was seen on an
# emulated build made with CUDNN_HOME=/nonexistent ("the project's kernels: this megatron-c was
# built without cuDNN ..."). About 10 s, and 20-40 s more where nvcc compiles attention_select.cu.
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}

if [ ! -f "$CUDA_HOME/include/cuda_runtime.h" ] || ! command -v g++ >/dev/null; then
    skip "a build without cuDNN" "no CUDA headers under $CUDA_HOME or no g++"
    exit 0
fi
NONE=$MC_TMP/no-cudnn
mkdir -p "$NONE"
# what make would do for the emulated tree, and for a CUDA tree, without cuDNN
make -n -B EMU=1 CUDNN_HOME="$NONE" build/emu/megatron-c >"$MC_TMP/emu-plan" 2>&1
check "make EMU=1 without cuDNN: no -DMC_WITH_CUDNN, no emulated cuDNN objects" \
    bash -c "! grep -q 'MC_WITH_CUDNN' '$MC_TMP/emu-plan' && ! grep -q 'test/emu/cudnn' '$MC_TMP/emu-plan' &&
             grep -q 'kernels/cuda/attention_select.cu' '$MC_TMP/emu-plan'"
if [ -f "$CUDA_HOME/include/cudnn_graph.h" ]; then
    make -n -B EMU=1 build/emu/megatron-c >"$MC_TMP/emu-plan-cudnn" 2>&1
    check "make EMU=1 with cuDNN's headers: -DMC_WITH_CUDNN and the emulated cuDNN linked" \
        bash -c "grep -q 'MC_WITH_CUDNN' '$MC_TMP/emu-plan-cudnn' && grep -q 'test/emu/cudnn_graph.o' '$MC_TMP/emu-plan-cudnn'"
fi
if [ -x "$CUDA_HOME/bin/nvcc" ]; then
    make -n -B CUDNN_HOME="$NONE" build/rel/megatron-c >"$MC_TMP/rel-plan" 2>&1
    check "make (CUDA) without cuDNN: nvcc without -DMC_WITH_CUDNN, no -lcudnn" \
        bash -c "grep -q 'nvcc.*attention_select.cu' '$MC_TMP/rel-plan' && ! grep -q 'MC_WITH_CUDNN' '$MC_TMP/rel-plan' &&
                 ! grep -q -- '-lcudnn' '$MC_TMP/rel-plan'"
fi
# nvcc when there is one: it refuses what g++ lets pass (a function only the cuDNN path uses,
# declared but never referenced: #177-D under -Werror all-warnings)
if [ -x "$CUDA_HOME/bin/nvcc" ]; then
    "$CUDA_HOME/bin/nvcc" -O0 -std=c++17 -I. -Xcompiler -Wall -gencode arch=compute_90a,code=sm_90a \
        -Werror all-warnings -c kernels/cuda/attention_select.cu -o "$MC_TMP/as.o" >"$MC_TMP/nvcc.err" 2>&1
    check "nvcc -Werror compiles kernels/cuda/attention_select.cu without cuDNN ($(head -c 200 "$MC_TMP/nvcc.err"))" \
        test -s "$MC_TMP/as.o"
fi
for f in attention_select cudnn_sdpa cudnn_graph backend_cuda; do
    g++ -Itest/emu/include -std=c++17 -O0 -Wall -Wextra -Wno-unused-parameter -Wno-unknown-pragmas -Werror -I. \
        -DMC_CUDA_EMU=1 -I"$CUDA_HOME/include" -include test/emu/cuda_emu.h -x c++ -fsyntax-only \
        "kernels/cuda/$f.cu" >"$MC_TMP/$f.err" 2>&1
    check "kernels/cuda/$f.cu compiles without cuDNN (-Wall -Wextra -Werror)" test ! -s "$MC_TMP/$f.err"
done
gcc -std=gnu11 -fsyntax-only -Wall -Wextra -Wno-unused-parameter -Werror -I. -I"$CUDA_HOME/include" -DMC_WITH_CUDA=1 \
    kernels/device.c kernels/attention_choice.c >"$MC_TMP/device.err" 2>&1
check "kernels/device.c and attention_choice.c compile in a CUDA build without cuDNN" test ! -s "$MC_TMP/device.err"
