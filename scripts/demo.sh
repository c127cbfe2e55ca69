#!/usr/bin/env bash
# Install everything needed, then run the demo: write a weather-like sharded zstd Zarr v3
# store with zarr-python (cached under benchmarks/.cache/), read random crops with lsio and
# with zarr-python, check they are identical and print crops/s and MB/s for both.
#
#   bash scripts/demo.sh                        # defaults (about a minute on 2 cores)
#   bash scripts/demo.sh --threads 1 --io pread # arguments go to benchmarks/demo.py (--help)
#
# Environment: see scripts/setup.sh.

set -euo pipefail

# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$LSIO_ROOT"

lsio_pip_install_package . "zarr>=3.1"
lsio_log "Demo: python benchmarks/demo.py $*"
lsio_run python benchmarks/demo.py "$@"
