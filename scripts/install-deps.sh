#!/usr/bin/env bash
# Installs the Debian packages megatron-c needs that are missing (apt-get). Safe to re-run.
#   scripts/install-deps.sh           build + test dependencies
#   scripts/install-deps.sh --torch   also python3-torch (PyTorch fixtures and the CPU benchmark)
# Both also make build/venv-tb, a private venv with the tensorboard package from PyPI, whose own
# reader test/integration/test_tensorboard.sh checks the event files with (skipped without it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pkgs=(gcc make libc6-dev libopenblas-dev libcmocka-dev zlib1g-dev libjansson-dev libpcre2-dev pkg-config
      libpmix-dev openmpi-bin libopenmpi-dev clang-format python3-venv)
[ "${1:-}" = "--torch" ] && pkgs+=(python3-torch python3-numpy python3-regex)

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

if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all packages present"
    tensorboard_venv
    exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
tensorboard_venv
