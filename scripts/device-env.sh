# Sourced (not run) on a GPU machine whose image has CUDA but not the Debian libraries
# megatron-c needs, before make, scripts/gpu-test.sh or bench/bench.sh:
#
#   source scripts/device-env.sh && make -j"$(nproc)" WERROR=1 tests
#
# Unpacks .devkit/kit.tar.gz (scripts/device-kit.sh; MC_KIT_TAR names another) under MC_KIT
# (/opt/mc-kit) once and points
# the Makefile (MC_KIT), the loader, PATH and Open MPI (OPAL_PREFIX: relocated) there. NCCL: the
# CUDA toolkit's when it has nccl.h, else the nvidia-nccl Python wheel's (whose lib/ lacks the
# libnccl.so link the linker wants: one is made under MC_KIT). cuDNN likewise (CUDNN_HOME): the
# toolkit's when it has cudnn_graph.h and libcudnn, else the nvidia-cudnn wheel's (its lib/ made
# reachable the same way, and put on the loader's path for the sublibraries libcudnn loads);
# without either the build uses the project's attention kernels and says so. Prints one line of
# what it set.
mc_kit_setup() {
    local root kit nccl
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    kit=${MC_KIT:-/opt/mc-kit}
    local tarball=${MC_KIT_TAR:-$root/.devkit/kit.tar.gz}
    if [ ! -d "$kit/usr/lib/x86_64-linux-gnu" ]; then
        [ -f "$tarball" ] || { echo "device-env: no $tarball (make it with scripts/device-kit.sh, then carry .devkit)" >&2; return 1; }
        mkdir -p "$kit" && tar xzf "$tarball" -C "$kit" || return 1
    fi
    local lib=$kit/usr/lib/x86_64-linux-gnu x
    for x in mpirun mpiexec mpicc; do # Debian's alternatives, which dpkg -x does not make
        [ -e "$kit/usr/bin/$x" ] || ln -s "$x.openmpi" "$kit/usr/bin/$x"
    done
    export MC_KIT=$kit
    export PATH="$kit/usr/bin:$PATH"
    export LD_LIBRARY_PATH="$lib:$lib/openblas-pthread:$lib/openmpi/lib:$lib/pmix2/lib:$kit/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export OPAL_PREFIX=$kit/usr PMIX_INSTALL_PREFIX=$kit/usr
    if [ -z "${CUDA_HOME:-}" ]; then # where nvcc is
        if [ -x /usr/local/cuda/bin/nvcc ] || ! command -v nvcc >/dev/null; then CUDA_HOME=/usr/local/cuda
        else CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")"); fi
    fi
    export CUDA_HOME PATH="$CUDA_HOME/bin:$PATH"
    nccl=${NCCL_HOME:-$CUDA_HOME}
    if [ ! -f "$nccl/include/nccl.h" ]; then
        # the NVIDIA wheels (nvidia/nccl/ or nvidia/cu13/): nccl.h and libnccl.so.2 somewhere below
        local pkg h l
        pkg=$(python3 -c 'import nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null) || pkg=""
        h=$([ -n "$pkg" ] && find -L "$pkg" -name nccl.h -path '*include*' 2>/dev/null | head -1)
        l=$([ -n "$pkg" ] && find -L "$pkg" -name 'libnccl.so.2' 2>/dev/null | head -1)
        if [ -z "$h" ] || [ -z "$l" ]; then
            echo "device-env: no nccl.h in \$CUDA_HOME/include nor in python3's nvidia wheels: set NCCL_HOME" >&2
            return 1
        fi
        mkdir -p "$kit/nccl/lib"
        ln -sfn "$(dirname "$h")" "$kit/nccl/include"
        ln -sf "$l" "$kit/nccl/lib/libnccl.so.2"
        ln -sf libnccl.so.2 "$kit/nccl/lib/libnccl.so"
        nccl=$kit/nccl
    fi
    export NCCL_HOME=$nccl
    for x in "$nccl/lib64" "$nccl/lib"; do [ -d "$x" ] && LD_LIBRARY_PATH="$x:$LD_LIBRARY_PATH"; done
    mc_cudnn_setup "$kit"
    echo "device-env: MC_KIT=$kit NCCL_HOME=$NCCL_HOME CUDA_HOME=$CUDA_HOME CUDNN_HOME=${CUDNN_HOME:-none} (mpirun: $(command -v mpirun))"
}
# cuDNN for the build and the loader (the header above): CUDNN_HOME exported, or left unset.
mc_cudnn_setup() { # kit
    local kit=$1 c=${CUDNN_HOME:-$CUDA_HOME} pkg h l
    if [ -f "$c/include/cudnn_graph.h" ] && ls "$c"/lib*/libcudnn.so* >/dev/null 2>&1; then
        export CUDNN_HOME=$c
        return
    fi
    pkg=$(python3 -c 'import nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null) || pkg=""
    h=$([ -n "$pkg" ] && find -L "$pkg" -name cudnn_graph.h -path '*include*' 2>/dev/null | head -1)
    l=$([ -n "$pkg" ] && find -L "$pkg" -name 'libcudnn.so.9' 2>/dev/null | head -1)
    if [ -z "$h" ] || [ -z "$l" ]; then
        echo "device-env: no cuDNN (cudnn_graph.h and libcudnn.so.9) in \$CUDA_HOME nor in python3's nvidia wheels: the attention runs on the project's kernels" >&2
        return
    fi
    mkdir -p "$kit/cudnn/lib"
    ln -sfn "$(dirname "$h")" "$kit/cudnn/include"
    ln -sf "$l" "$kit/cudnn/lib/libcudnn.so.9"
    ln -sf libcudnn.so.9 "$kit/cudnn/lib/libcudnn.so"
    export CUDNN_HOME=$kit/cudnn LD_LIBRARY_PATH="$(dirname "$l"):$LD_LIBRARY_PATH"
}
mc_kit_setup
