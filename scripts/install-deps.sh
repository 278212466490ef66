#!/usr/bin/env bash
# Installs the Debian packages megatron-c needs that are missing (apt-get). Safe to re-run.
#   scripts/install-deps.sh           build + test dependencies
#   scripts/install-deps.sh --torch   also python3-torch (PyTorch fixtures and the CPU benchmark)
#   scripts/install-deps.sh --torch2  also build/venv-torch2: PyTorch 2.x from PyPI, CPU only,
#                                     and transformers (about 1.5 GB), for
#                                     test/integration/test_dcp_pytorch.sh and test_hf.sh's logits
# All also make build/venv-tb, a private venv with the tensorboard package from PyPI, whose own
# reader test/integration/test_tensorboard.sh checks the event files with (skipped without it),
# build/venv-tok, the tokenizer libraries Megatron calls (the tokenizer tests' references),
# and build/venv-hf, with the safetensors package and numpy, with which
# test/integration/test_hf.sh opens the files export-hf writes (skipped without it).
# --torch and --torch2 may be given together. CI installs --torch only.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pkgs=(gcc g++ make libc6-dev libopenblas-dev libcmocka-dev zlib1g-dev libjansson-dev libyaml-dev libpcre2-dev pkg-config
      libpmix-dev openmpi-bin libopenmpi-dev clang-format python3-venv libsentencepiece-dev)
want_torch2=0
for a in "$@"; do
    case $a in
    --torch) pkgs+=(python3-torch python3-numpy python3-regex) ;;
    --torch2) want_torch2=1 pkgs+=(binutils) ;; # readelf, for the CUDA stand-ins below
    *) echo "install-deps: unknown option $a (--torch, --torch2)" >&2; exit 2 ;;
    esac
done
# The torch that --torch2 installs: 2.15 is the first that reads the 6-item TensorProperties of
# the Megatron references in shared/data/megatron-ref/torch_dist (see FORMAT.md there).
TORCH2_VERSION=2.15.0

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# TensorBoard's reader for the tests, in a venv of its own (nothing installed system-wide). Quick
# when it is there; without PyPI it warns, and the TensorBoard test reports itself skipped.
tensorboard_venv() {
    local venv=$root/build/venv-tb py=/usr/bin/python3
    [ -x "$py" ] || py=python3
    if "$venv/bin/python" -c 'import tensorboard' 2>/dev/null; then
        echo "install-deps: tensorboard present in build/venv-tb"
        return 0
    fi
    echo "install-deps: installing tensorboard into build/venv-tb"
    if ! { "$py" -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check tensorboard; }; then
        echo "install-deps: WARNING: could not install tensorboard into build/venv-tb (PyPI unreachable?);" \
             "test/integration/test_tensorboard.sh will be skipped" >&2
    fi
}

# The tokenizer libraries Megatron's tokenizers call, in build/venv-tok: the references of the
# tokenizer tests (skipped without it). sentencepiece is pinned to a wheel that encodes as Debian's
# libsentencepiece 0.1.97 (what megatron-c links) does: 0.1.97 to 0.2.1 agree on every test
# document; 0.2.3 breaks some unigram ties the other way ("; ---" ends "-" "--", not "--" "-").
SENTENCEPIECE_VERSION=0.2.1
tok_venv() {
    local venv=$root/build/venv-tok py=/usr/bin/python3
    [ -x "$py" ] || py=python3
    if "$venv/bin/python" -c "import tokenizers, tiktoken, numpy, sentencepiece as s
assert s.__version__ == '$SENTENCEPIECE_VERSION'" 2>/dev/null; then
        echo "install-deps: tokenizer libraries present in build/venv-tok"
        return 0
    fi
    echo "install-deps: installing tokenizers, tiktoken, sentencepiece, numpy into build/venv-tok"
    if ! { "$py" -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check tokenizers \
        tiktoken numpy "sentencepiece==$SENTENCEPIECE_VERSION"; }; then
        echo "install-deps: WARNING: could not install the tokenizer libraries into build/venv-tok" \
             "(PyPI unreachable?); the tokenizer tests' comparisons will be skipped" >&2
    fi
}

# safetensors (its numpy API) and numpy for test/integration/test_hf.sh, in build/venv-hf (about
# 40 MB). Quick when there; without PyPI it warns, and that test's safetensors checks are skipped.
hf_venv() {
    local venv=$root/build/venv-hf py=/usr/bin/python3
    [ -x "$py" ] || py=python3
    if "$venv/bin/python" -c 'import safetensors.numpy, numpy' 2>/dev/null; then
        echo "install-deps: safetensors and numpy present in build/venv-hf"
        return 0
    fi
    echo "install-deps: installing safetensors and numpy into build/venv-hf"
    if ! { "$py" -m venv "$venv" &&
        "$venv/bin/pip" install -q --disable-pip-version-check safetensors numpy; }; then
        echo "install-deps: WARNING: could not install safetensors into build/venv-hf (PyPI unreachable?);" \
             "test/integration/test_hf.sh will skip its safetensors checks" >&2
    fi
}

# PyTorch 2.x for torch.distributed.checkpoint, CPU only, in build/venv-torch2 (--torch2). PyPI's
# Linux torch wheel is a CUDA build whose nvidia-* dependencies are several GB: the wheel goes in
# with --no-deps after its pure-Python dependencies, and scripts/torch-cuda-stubs.py writes small
# stand-ins for the CUDA libraries it links against (torch then sees no GPU). Quick when there;
# without PyPI (or room) it warns, and test/integration/test_dcp_pytorch.sh reports itself skipped.
torch2_venv() {
    local venv=$root/build/venv-torch2 py=/usr/bin/python3 pip have start=$SECONDS
    [ -x "$py" ] || py=python3
    pip=("$venv/bin/pip" install -q --no-cache-dir --disable-pip-version-check)
    if have=$("$venv/bin/python" -c 'import torch, torch.distributed.checkpoint, transformers; print(torch.__version__)' 2>/dev/null) &&
        [ "${have%%+*}" = "$TORCH2_VERSION" ]; then
        echo "install-deps: torch $have present in build/venv-torch2"
        return 0
    fi
    local free_kb
    free_kb=$(df -Pk "$root" | awk 'NR == 2 { print $4 }')
    if [ "$free_kb" -lt $((4 * 1024 * 1024)) ]; then
        echo "install-deps: WARNING: under 4 GB free on $root: build/venv-torch2 (1.4 GB) not made;" \
             "test/integration/test_dcp_pytorch.sh will be skipped" >&2
        return 0
    fi
    echo "install-deps: installing torch $TORCH2_VERSION (CPU use only) into build/venv-torch2"
    if ! { "$py" -m venv "$venv" &&
        "${pip[@]}" filelock 'typing-extensions>=4.13.0' 'setuptools>=77.0.3' 'sympy>=1.13.3' mpmath \
            'networkx>=2.5.1' jinja2 MarkupSafe 'fsspec>=0.8.5' numpy &&
        "${pip[@]}" --no-deps "torch==$TORCH2_VERSION" &&
        "${pip[@]}" transformers safetensors; }; then
        echo "install-deps: WARNING: could not install torch $TORCH2_VERSION into build/venv-torch2" \
             "(PyPI unreachable?); test/integration/test_dcp_pytorch.sh will be skipped" >&2
        return 0
    fi
    local torch_dir
    torch_dir=$("$venv/bin/python" -c 'import importlib.util as u, os; print(os.path.dirname(u.find_spec("torch").origin))')
    if ! "$venv/bin/python" "$root/scripts/torch-cuda-stubs.py" "$torch_dir" "$torch_dir/lib" ||
        ! have=$("$venv/bin/python" -c 'import torch, torch.distributed.checkpoint
assert not torch.cuda.is_available()
print(torch.__version__)'); then
        echo "install-deps: WARNING: torch $TORCH2_VERSION in build/venv-torch2 does not import;" \
             "test/integration/test_dcp_pytorch.sh will be skipped" >&2
        return 0
    fi
    echo "install-deps: torch $have in build/venv-torch2 ($(du -sh "$venv" | cut -f1), $((SECONDS - start)) s)"
}

if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all packages present"
    tensorboard_venv
    tok_venv
    hf_venv
    [ $want_torch2 = 0 ] || torch2_venv
    exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
tensorboard_venv
tok_venv
hf_venv
[ $want_torch2 = 0 ] || torch2_venv
