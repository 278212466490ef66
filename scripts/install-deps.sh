#!/usr/bin/env bash
# Installs the Debian packages megatron-c needs that are missing (apt-get). Safe to re-run.
#   scripts/install-deps.sh           build + test dependencies
#   scripts/install-deps.sh --torch   also python3-torch (PyTorch fixtures and the CPU benchmark)
set -euo pipefail
pkgs=(gcc make libc6-dev libopenblas-dev libcmocka-dev zlib1g-dev libjansson-dev libpcre2-dev pkg-config
      libpmix-dev openmpi-bin libopenmpi-dev clang-format)
[ "${1:-}" = "--torch" ] && pkgs+=(python3-torch python3-numpy python3-regex)

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && { echo "install-deps: all packages present"; exit 0; }

echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
