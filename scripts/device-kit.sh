#!/usr/bin/env bash
# Packs the Debian libraries megatron-c builds and tests against (OpenBLAS, cmocka, jansson,
# PCRE2, zlib's headers, SentencePiece, PMIx, Open MPI and what they load) into
# .devkit/kit.tar.gz, for a GPU machine that has CUDA but not these and cannot install packages
# (the device tool's image).
# Run it here, on Debian 12 with apt (the CI image: the package names are Debian 12's), then
# carry .devkit to the GPU machine and there `source scripts/device-env.sh`, which unpacks it.
#
# Only the named packages are fetched (apt-get download, no dependency closure): what a CUDA
# image certainly has (libc, libstdc++, zlib, libssl, libudev) stays out. Static libraries,
# documentation and the alternatives' BLAS/LAPACK copies are dropped: about 21 MB packed.
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(libcmocka-dev libcmocka0 libjansson-dev libjansson4 libyaml-dev libyaml-0-2 libpcre2-dev libpcre2-8-0 libpcre2-16-0
      libpcre2-32-0 libpcre2-posix3 zlib1g-dev
      libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libopenblas0 libgfortran5 libquadmath0
      libpmix-dev libpmix2 libevent-2.1-7 libevent-core-2.1-7 libevent-pthreads-2.1-7 libhwloc15 libmunge2
      openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libfabric1 libucx0 libibverbs1 librdmacm1
      libpsm2-2 libpsm-infinipath1 libnl-3-200 libnl-route-3-200 libnuma1 libpciaccess0 libltdl7
      libxnvctrl0 ocl-icd-libopencl1 libbsd0 libmd0 libsentencepiece-dev libsentencepiece0)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/debs" "$tmp/root" .devkit
(cd "$tmp/debs" && apt-get download -qq "${PKGS[@]}") || {
    echo "device-kit: apt-get download failed (run 'apt-get update' first; the names are Debian 12's)" >&2
    exit 1
}
for f in "$tmp"/debs/*.deb; do dpkg -x "$f" "$tmp/root"; done
r=$tmp/root
rm -rf "$r/usr/share/doc" "$r/usr/share/man" "$r/usr/share/lintian" "$r/usr/lib/x86_64-linux-gnu/fortran" \
    "$r/usr/lib/x86_64-linux-gnu/openblas-pthread/cmake"
rm -f "$r"/usr/lib/x86_64-linux-gnu/openblas-pthread/{libblas,liblapack}.so*
find "$r" -name '*.a' -delete
tar czf .devkit/kit.tar.gz -C "$r" .
echo "device-kit: .devkit/kit.tar.gz ($(du -h .devkit/kit.tar.gz | cut -f1)): carry .devkit, then 'source scripts/device-env.sh' there"
