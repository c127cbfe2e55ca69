#!/usr/bin/env bash
# Prepare a machine to build, test and demo lsio. Idempotent, never prompts.
#
# Usage:
#   bash scripts/setup.sh            # system packages + .venv + build deps + `pip install .`
#   source scripts/setup.sh          # the same minus the package install; leaves .venv active
#                                    # and defines lsio_pip_install_package for the caller
#
# Steps:
#   1. Debian/Ubuntu: install the missing apt packages (checked one by one with `dpkg -s`),
#      as root or through sudo. Elsewhere (no dpkg) the step is skipped with a warning.
#   2. Create .venv (or reuse it if it still works) with `python3 -m venv`.
#   3. pip-install the build dependencies into it (scikit-build-core, pybind11, numpy,
#      ninja, cmake). Already-satisfied requirements make no network requests.
#
# Environment:
#   LSIO_PYTHON       interpreter that creates the venv (default: python3)
#   LSIO_VENV         venv directory (default: <repo>/.venv)
#   LSIO_SKIP_APT=1   skip step 1 (you installed the system packages yourself)
#   LSIO_TORCH_INDEX  where lsio_pip_install_torch looks for torch besides pip's own indexes
#                     (default: PyTorch's CPU-only index on a machine without an NVIDIA GPU,
#                     none with one; empty: none)
#   CI=true           no interactive sudo, no pip progress bars

set -euo pipefail

LSIO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LSIO_VENV="${LSIO_VENV:-$LSIO_ROOT/.venv}"
LSIO_PYTHON="${LSIO_PYTHON:-python3}"
# Build-time Python packages; keep in line with [build-system] in pyproject.toml.
LSIO_BUILD_DEPS=("scikit-build-core>=0.10" "pybind11>=2.12" "numpy>=1.24" "ninja" "cmake>=3.20")
# Where scikit-build-core keeps its CMake tree, so that reinstalls rebuild incrementally.
LSIO_WHEEL_BUILD_DIR="build/wheel"
LSIO_APT_PACKAGES=(
  g++ cmake pkg-config
  # ccache: CMakeLists.txt compiles through it when present, so a wiped or new build tree (every
  # `pip install .` under pip's build isolation, another Python's wheel) reuses the objects.
  ccache
  liburing-dev libzstd-dev zlib1g-dev nlohmann-json3-dev libgtest-dev libgmock-dev
  # c-blosc 1.x (1.21 on Debian 12): the Zarr `blosc` codec (cpp/src/codec/blosc.cc).
  libblosc-dev
  # liblz4: numcodecs' lz4 compressor of Zarr v2 arrays (cpp/src/codec/numcodecs.cc).
  liblz4-dev
  # libdeflate: gzip/zlib chunks of known size (cpp/src/codec/gzip.cc), faster than zlib.
  libdeflate-dev
  # FlatBuffers: Icechunk's metadata files, read through code flatc generates at build time
  # from cpp/src/store/icechunk.fbs (the headers only at run time).
  libflatbuffers-dev flatbuffers-compiler
  # libbz2, liblzma: numcodecs' bz2 and lzma compressors (cpp/src/codec/bz2.cc, lzma.cc).
  libbz2-dev liblzma-dev
  # Remote stores (cpp/src/net/): libcrypto for SigV4 signing, libcurl for the HTTP client
  # (Debian 12: OpenSSL 3.0, curl 7.88). Needed by every build, the wheel included.
  libssl-dev libcurl4-openssl-dev
  # Google Benchmark (1.7 on Debian 12): benchmarks/cpp/lsio_microbench, smoke-run in ctest.
  libbenchmark-dev
  # Remote-store tests (tests/python/remote_servers.py): nginx serves test stores over HTTP and
  # HTTPS, started by the tests on their own ports with their own config; the openssl CLI makes
  # their TLS certificates. `nginx`, not `nginx-light`: in Debian 12 the latter is only a
  # transitional package pulling in nginx. The package's own service is kept stopped and
  # disabled (lsio_quiet_nginx_service).
  nginx openssl
  python3-dev python3-venv python3-pip git
  # scripts/fuzz.sh: libFuzzer. clang >= 15 (the engine uses _Float16); g++ brings the
  # ASan/UBSan/TSan runtimes for scripts/sanitize.sh.
  clang-16 libclang-rt-16-dev
)

export PIP_NO_INPUT=1
export PIP_DISABLE_PIP_VERSION_CHECK=1
if [ "${CI:-}" = "true" ] || [ ! -t 1 ]; then
  export PIP_PROGRESS_BAR=off
fi

lsio_log() { printf '\n==> %s\n' "$*"; }
lsio_die() { printf '\nerror: %s\n' "$*" >&2; exit 1; }
lsio_run() { printf '+ %s\n' "$*"; "$@"; }

lsio_install_apt_packages() {
  if [ "${LSIO_SKIP_APT:-0}" = "1" ]; then
    lsio_log "Skipping system packages (LSIO_SKIP_APT=1)"
    return 0
  fi
  if ! command -v dpkg >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    lsio_log "No dpkg/apt-get here: install the equivalents of these yourself: ${LSIO_APT_PACKAGES[*]}"
    return 0
  fi
  local missing=() pkg
  for pkg in "${LSIO_APT_PACKAGES[@]}"; do
    # `dpkg -s` also succeeds for removed-but-configured packages; check the status line.
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
      missing+=("$pkg")
    fi
  done
  if [ "${#missing[@]}" -eq 0 ]; then
    lsio_log "System packages: all ${#LSIO_APT_PACKAGES[@]} present"
    return 0
  fi
  lsio_log "Installing missing system packages: ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
      lsio_die "not root and no sudo: as root, run
  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}
or set LSIO_SKIP_APT=1 if you provide them another way."
    fi
    if [ -t 0 ] && [ "${CI:-}" != "true" ]; then sudo=(sudo); else sudo=(sudo -n); fi
  fi
  local apt_opts=(-o DPkg::Lock::Timeout=600 -o Dpkg::Use-Pty=0)
  local new_nginx=0
  for pkg in "${missing[@]}"; do [ "$pkg" != nginx ] || new_nginx=1; done
  if [ "$new_nginx" = 1 ]; then lsio_quiet_nginx_service before "${sudo[@]}"; fi
  lsio_run "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" update -q
  lsio_run "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y -q \
    --no-install-recommends "${missing[@]}" </dev/null
  if [ "$new_nginx" = 1 ]; then lsio_quiet_nginx_service after "${sudo[@]}"; fi
}

# lsio_quiet_nginx_service before|after [sudo...]: the tests only need the nginx binary, but
# Debian's postinst starts (and enables) a system nginx on port 80 where an init system runs,
# and fails the whole install if that start fails (port 80 taken and no `ss` to notice it).
# Under systemd the unit is masked for the install (invoke-rc.d then skips the start), then
# unmasked and left disabled. Without an init system (containers) invoke-rc.d starts nothing.
# Only called when this script installs nginx: an nginx the machine already had is left alone.
lsio_quiet_nginx_service() {
  local when="$1"; shift
  [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1 || return 0
  if [ "$when" = before ]; then
    lsio_run "$@" systemctl mask nginx.service || true
  else
    lsio_run "$@" systemctl unmask nginx.service || true
    lsio_run "$@" systemctl disable --now nginx.service || true
  fi
}

lsio_setup_venv() {
  local py="$LSIO_VENV/bin/python"
  if [ -x "$py" ] && "$py" -c 'import sys, pip; assert sys.version_info >= (3, 10)' >/dev/null 2>&1; then
    lsio_log "Reusing virtual environment $LSIO_VENV ($("$py" --version 2>&1))"
  else
    command -v "$LSIO_PYTHON" >/dev/null 2>&1 || lsio_die "$LSIO_PYTHON not found (set LSIO_PYTHON)"
    "$LSIO_PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
      lsio_die "lsio needs Python >= 3.10; $LSIO_PYTHON is $("$LSIO_PYTHON" --version 2>&1)"
    if [ -e "$LSIO_VENV" ]; then
      lsio_log "Virtual environment $LSIO_VENV is broken or too old: recreating it"
      rm -rf "$LSIO_VENV"
    fi
    lsio_log "Creating virtual environment $LSIO_VENV with $(command -v "$LSIO_PYTHON") ($("$LSIO_PYTHON" --version 2>&1))"
    lsio_run "$LSIO_PYTHON" -m venv "$LSIO_VENV"
    lsio_run "$py" -m pip install --upgrade pip
  fi
  # Activate for the rest of the calling script: puts the venv's python, cmake and ninja on PATH.
  # (Done by hand rather than via bin/activate, which is not written for `set -u`.)
  export VIRTUAL_ENV="$LSIO_VENV"
  export PATH="$LSIO_VENV/bin:$PATH"
  unset PYTHONHOME
  hash -r
  lsio_log "Installing build dependencies into the venv"
  lsio_run python -m pip install "${LSIO_BUILD_DEPS[@]}"
}

# lsio_pip_install_package SPEC... : build lsio from this checkout (non-editable, the way users
# get it) and install it with SPEC's extras / extra requirements, e.g. ".[test]" or "." "zarr>=3.1".
# No build isolation: the build uses the venv's pinned build deps, and the CMake tree in
# build/wheel survives between runs, so only changed sources are recompiled.
lsio_pip_install_package() {
  lsio_log "Building and installing lsio into the venv: $*"
  (cd "$LSIO_ROOT" && lsio_run python -m pip install --no-build-isolation \
    "-Cbuild-dir=$LSIO_WHEEL_BUILD_DIR" "$@")
}

# lsio_pip_install_torch SPEC... : pip-install torch (SPEC, e.g. "torch==2.13.0") without a silent
# multi-GB CUDA download on a machine that has no NVIDIA GPU. PyPI's Linux torch is the CUDA
# build (with its nvidia-* wheels ~3 GB to download, 5.6 GB installed); PyTorch's CPU-only
# builds (about 200 MB, versions like 2.13.0+cpu, which satisfy torch==2.13.0) are on
# https://download.pytorch.org/whl/cpu.
# Without a GPU that index is added to pip's (--extra-index-url: torch's dependencies still come
# from PyPI, and the +cpu build wins a version tie). Where that index cannot be reached (an
# offline mirror, a firewall) pip's configured indexes and find-links decide alone, as
# before, and a note says so. LSIO_TORCH_INDEX overrides the index (empty: none).
lsio_has_nvidia_gpu() {
  [ -e /proc/driver/nvidia/version ] || [ -e /dev/nvidia0 ] ||
    { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }
}
lsio_pip_install_torch() {
  local index
  if [ -n "${LSIO_TORCH_INDEX+set}" ]; then
    index="$LSIO_TORCH_INDEX"
  elif lsio_has_nvidia_gpu; then
    index=""
  else
    index="https://download.pytorch.org/whl/cpu"
  fi
  local extra=()
  if [ -n "$index" ]; then
    if python - "$index" <<'PY' >/dev/null 2>&1
import sys, urllib.request
urllib.request.urlopen(sys.argv[1].rstrip("/") + "/torch/", timeout=10).close()
PY
    then
      extra=(--extra-index-url "$index")
    else
      lsio_log "note: cannot reach $index; torch comes from pip's configured indexes" \
        "(on plain PyPI that is the multi-GB CUDA build; set LSIO_TORCH_INDEX to a reachable CPU index)"
    fi
  fi
  lsio_run python -m pip install "${extra[@]}" "$@"
}

lsio_setup() {
  lsio_log "lsio setup in $LSIO_ROOT"
  lsio_install_apt_packages
  lsio_setup_venv
}

lsio_setup
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  # Executed, not sourced: finish with the package itself.
  lsio_pip_install_package .
  lsio_log "Done. Activate with: source $LSIO_VENV/bin/activate"
fi
