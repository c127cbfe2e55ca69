#!/usr/bin/env bash
# Proves the wheel installs and reads data where there is no compiler and no -dev package:
# a clean Debian 12 root made by `debootstrap --variant=minbase`, with only python3, venv and
# pip added, `pip install`s the wheel (numpy from PyPI) and runs tests/data/wheel_smoke.py on
# the store shipped in tests/data/smoke_store.zarr.
#
# Usage (as root: debootstrap and chroot need it; scripts/test.sh runs it in CI):
#   bash scripts/wheel_smoke.sh [WHEEL]      # default: the newest dist/lsio-*manylinux*.whl
#
# Environment:
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

[ "$(id -u)" = 0 ] || die "run as root (debootstrap and chroot need it)"
wheel="${1:-}"
if [ -z "$wheel" ]; then
  wheel="$(ls -t "$root_dir"/dist/lsio-*manylinux*.whl 2>/dev/null | head -1 || true)"
  [ -n "$wheel" ] || die "no wheel given and none in dist/: run scripts/build_wheel.sh first"
fi
[ -f "$wheel" ] || die "no such wheel: $wheel"
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
