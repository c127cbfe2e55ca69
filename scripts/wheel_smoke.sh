#!/usr/bin/env bash
# Smoke tests of built wheels (scripts/build_wheel.sh builds them into dist/). Two modes:
#
#   bash scripts/wheel_smoke.sh [WHEEL]              # clean Debian root, as root (scripts/test.sh)
#   bash scripts/wheel_smoke.sh --venv [WHEEL...]    # clean venvs, any user
#
# Clean root: proves the wheel installs and reads data where there is no compiler and no -dev
# package: a clean Debian 12 root made by `debootstrap --variant=minbase`, with only python3,
# venv and pip added, `pip install`s the wheel (numpy from PyPI) and runs tests/data/wheel_smoke.py
# on the store shipped in tests/data/smoke_store.zarr. Debian 12's python3 is 3.11, so this
# takes the cp311 wheel (default: the newest dist/lsio-*-cp311-*manylinux*.whl).
#
# --venv: for each wheel (default: the newest dist/lsio-*manylinux*.whl of each cp3XX tag), a
# CPython of the wheel's version (scripts/pythons.sh: pyenv's, or python3.X on PATH;
# --python PATH names it when one wheel is given) makes a fresh venv in a temporary directory
# outside the repository; pip installs the wheel and zarr-python there (whatever release pip
# picks for that Python: zarr 3 from 3.11, zarr 2 on 3.10), and from that directory, with
# python -I (no PYTHONPATH, no user site), tests/data/wheel_smoke.py reads the shipped store and
# tests/data/wheel_smoke_zarr.py reads arrays that zarr-python writes there, comparing with
# numpy. A wheel whose Python is not on this machine is reported as SKIPPED. The directory is
# removed afterwards (LSIO_SMOKE_KEEP=1 keeps it).
#
# Environment (clean root):
#   LSIO_SMOKE_ROOT     where the root lives (default build/clean-root; reused when complete)
#   LSIO_DEBIAN_MIRROR  Debian mirror for debootstrap (default: the host's first deb.debian.org
#                       style URI in /etc/apt, else http://deb.debian.org/debian)
#
# The root gets the host's resolv.conf, CA bundle and pip settings (index, certificate), so pip
# inside it reaches the same registry the host does; /proc is mounted for the run and
# unmounted on exit. Exits non-zero if the root holds a compiler or a -dev package, if the
# install fails, or if the smoke script does.
set -euo pipefail
root_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf '\n==> %s\n' "$*"; }
die() { printf '\nerror: %s\n' "$*" >&2; exit 1; }
# shellcheck source=scripts/pythons.sh
source "$root_dir/scripts/pythons.sh"

wheel_tag() {  # lsio-0.1.0-cp312-cp312-manylinux_2_35_x86_64.whl -> cp312
  local name="${1##*/}"
  name="${name#*-}"; name="${name#*-}"
  printf '%s\n' "${name%%-*}"
}
tag_version() {  # cp312 -> 3.12
  local t="${1#cp}"
  printf '%s.%s\n' "${t:0:1}" "${t:1}"
}

# ------------------------------------------------------------------ --venv: clean venvs
smoke_in_venv() {  # smoke_in_venv WHEEL PYTHON
  local wheel="$1" py="$2" tmp rc=0
  tmp="$(mktemp -d "${TMPDIR:-/tmp}/lsio-wheel-smoke.XXXXXX")"
  case "$tmp" in "$root_dir"/*) die "temporary directory $tmp is inside the repository";; esac
  log "$(basename "$wheel"): fresh venv in $tmp with $py ($("$py" --version 2>&1))"
  cp "$root_dir/tests/data/wheel_smoke.py" "$root_dir/tests/data/wheel_smoke_zarr.py" "$tmp/"
  cp -r "$root_dir/tests/data/smoke_store.zarr" "$tmp/"
  mkdir "$tmp/work"
  (
    set -e
    cd "$tmp"
    unset PYTHONPATH PYTHONHOME VIRTUAL_ENV
    export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_PROGRESS_BAR=off
    "$py" -m venv "$tmp/venv"
    "$tmp/venv/bin/python" -m pip install -q "$wheel" zarr
    "$tmp/venv/bin/python" -I -c "import lsio, sys; assert lsio.__file__.startswith(sys.prefix), lsio.__file__"
    "$tmp/venv/bin/python" -I wheel_smoke.py smoke_store.zarr
    "$tmp/venv/bin/python" -I wheel_smoke_zarr.py "$tmp/work"
  ) || rc=$?
  if [ "${LSIO_SMOKE_KEEP:-0}" = 1 ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
  return "$rc"
}

if [ "${1:-}" = "--venv" ]; then
  shift
  python_override=""
  wheels=()
  while [ "$#" -gt 0 ]; do
    case "$1" in
      --python) python_override="$2"; shift ;;
      -*) die "unknown option: $1" ;;
      *) wheels+=("$1") ;;
    esac
    shift
  done
  if [ "${#wheels[@]}" -eq 0 ]; then
    for v in "${LSIO_CPYTHON_VERSIONS[@]}"; do
      w="$(ls -t "$root_dir"/dist/lsio-*-cp${v/./}-*manylinux*.whl 2>/dev/null | head -1 || true)"
      [ -z "$w" ] || wheels+=("$w")
    done
    [ "${#wheels[@]}" -gt 0 ] || die "no wheel given and none in dist/: run scripts/build_wheel.sh first"
  fi
  [ -z "$python_override" ] || [ "${#wheels[@]}" -eq 1 ] || die "--python goes with exactly one wheel"
  results=() failed=0
  for w in "${wheels[@]}"; do
    [ -f "$w" ] || die "no such wheel: $w"
    ver="$(tag_version "$(wheel_tag "$w")")"
    py="$python_override"
    if [ -z "$py" ] && ! py="$(lsio_find_cpython "$ver")"; then
      log "SKIPPED $(basename "$w"): no CPython $ver here (pyenv's versions, python$ver on PATH)"
      results+=("$ver  SKIPPED (no CPython $ver)  $(basename "$w")")
      continue
    fi
    if smoke_in_venv "$w" "$py"; then
      results+=("$ver  ok       $(basename "$w")")
    else
      results+=("$ver  FAILED   $(basename "$w")"); failed=1
    fi
  done
  log "Wheel smoke tests in clean venvs"
  printf '  %s\n' "${results[@]}"
  exit "$failed"
fi

# ------------------------------------------------------------------ clean Debian root
[ "$(id -u)" = 0 ] || die "run as root (debootstrap and chroot need it)"
wheel="${1:-}"
chroot_dir="${LSIO_SMOKE_ROOT:-$root_dir/build/clean-root}"

if ! command -v debootstrap >/dev/null 2>&1; then
  log "Installing debootstrap"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -q
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends debootstrap </dev/null
fi

mirror="${LSIO_DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
  mirror="$(grep -rhoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d 2>/dev/null \
            | grep -oE 'https?://[^ ]+' | head -1 || true)"
  mirror="${mirror:-http://deb.debian.org/debian}"
fi

cleanup() { umount "$chroot_dir/proc" 2>/dev/null || true; }
trap cleanup EXIT

if [ ! -f "$chroot_dir/.lsio-root-complete" ]; then
  log "Creating a clean Debian 12 root in $chroot_dir (minbase + python3, venv, pip) from $mirror"
  rm -rf "$chroot_dir"
  debootstrap --variant=minbase --include=python3,python3-venv,python3-pip bookworm "$chroot_dir" "$mirror"
  touch "$chroot_dir/.lsio-root-complete"
fi

root_tag="$(chroot "$chroot_dir" /usr/bin/python3 -c 'import sys; print("cp%d%d" % sys.version_info[:2])')"
if [ -z "$wheel" ]; then
  wheel="$(ls -t "$root_dir"/dist/lsio-*-"$root_tag"-*manylinux*.whl 2>/dev/null | head -1 || true)"
  [ -n "$wheel" ] || die "no wheel given and no $root_tag wheel (the clean root's Python) in dist/: run scripts/build_wheel.sh first (--python $(tag_version "$root_tag"))"
fi
[ -f "$wheel" ] || die "no such wheel: $wheel"
[ "$(wheel_tag "$wheel")" = "$root_tag" ] ||
  die "$(basename "$wheel") is for $(wheel_tag "$wheel"), the clean root's Python is $root_tag: give a $root_tag wheel"

log "Checking that the root has no compiler and no -dev package"
for cc in gcc g++ cc c++ clang; do
  if chroot "$chroot_dir" /bin/sh -c "command -v $cc" >/dev/null 2>&1; then die "the clean root has $cc"; fi
done
dev="$(chroot "$chroot_dir" dpkg-query -W -f '${Package}\n' | grep -E -- '-dev$' || true)"
[ -z "$dev" ] || die "the clean root has -dev packages: $dev"

log "Copying the wheel, the smoke script and its store into the root"
work="$chroot_dir/tmp/lsio-smoke"
rm -rf "$work"
mkdir -p "$work"
cp "$wheel" "$work/"
cp "$root_dir/tests/data/wheel_smoke.py" "$work/"
cp -r "$root_dir/tests/data/smoke_store.zarr" "$work/"
cp /etc/resolv.conf "$chroot_dir/etc/resolv.conf" 2>/dev/null || true
# The host's CA bundle and pip settings, so pip in the root reaches the same registry.
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  mkdir -p "$chroot_dir/etc/lsio-host"
  cp /etc/ssl/certs/ca-certificates.crt "$chroot_dir/etc/lsio-host/ca.crt"
fi
mount -t proc proc "$chroot_dir/proc"

log "Installing $(basename "$wheel") into a venv in the root and running the smoke script"
pip_env=(PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 HOME=/root)
[ -f "$chroot_dir/etc/lsio-host/ca.crt" ] && pip_env+=(PIP_CERT=/etc/lsio-host/ca.crt)
[ -n "${PIP_INDEX_URL:-}" ] && pip_env+=("PIP_INDEX_URL=$PIP_INDEX_URL")
chroot "$chroot_dir" /usr/bin/env -i PATH=/usr/bin:/bin "${pip_env[@]}" /bin/sh -ec "
  rm -rf /opt/lsio-venv
  python3 -m venv /opt/lsio-venv
  /opt/lsio-venv/bin/pip install -q /tmp/lsio-smoke/$(basename "$wheel")
  cd /
  /opt/lsio-venv/bin/python /tmp/lsio-smoke/wheel_smoke.py /tmp/lsio-smoke/smoke_store.zarr
"
log "The wheel installs and reads data in a clean root"
