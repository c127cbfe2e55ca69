#!/usr/bin/env bash
# Install lsio and its peers, then run the benchmark suite (benchmarks/python/suite.py):
# lsio vs TensorStore, zarr-python 3 and zarr-python with the zarrs codec pipeline, beside the
# machine's limits (raw pread/io_uring reads, libzstd, memcpy) measured in the same run; W7 reads
# over HTTP from benchmarks/python/object_server.py (aiohttp) with zarr-python over obstore/fsspec.
#
#   bash scripts/bench.sh                     # everything, < 15 min on 2 cores; writes
#                                             # benchmarks/results/ and benchmarks/RESULTS.md
#   bash scripts/bench.sh --quick             # small stores, 2 rounds (< 2 min smoke run)
#   bash scripts/bench.sh --only W1,W3 --rounds 5 --threads 2 --out /tmp/res
#   bash scripts/bench.sh --help              # all options of the suite
#
# Stores are written once with zarr-python into benchmarks/.cache/ (about 1.4 GiB).
# A peer that cannot be installed is reported as "not installed" in the results.
# Environment: see scripts/setup.sh.

set -euo pipefail

# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$LSIO_ROOT"

# Required: lsio itself and zarr-python 3 (writes the stores, is the correctness reference).
lsio_pip_install_package . "zarr>=3.1" "numpy>=1.24"
# Peers and the plot: each optional, installed one by one so one failure does not stop the rest.
# obstore, fsspec and aiohttp: W7 (zarr-python over HTTP; aiohttp also runs object_server.py).
# zarrs, xarray and dask: W13 (zarr-python's API with zarrs-python's pipeline, xarray, dask).
for spec in "tensorstore" "zarrs>=0.2,<0.3" "matplotlib" "obstore" "fsspec" "aiohttp" "xarray" "dask[array]"; do
  if ! lsio_run python -m pip install "$spec"; then
    lsio_log "warning: could not install $spec; the suite reports it as not installed"
  fi
done

export LSIO_BENCH_COMMAND="bash scripts/bench.sh${*:+ $*}"
lsio_log "Benchmarks: python benchmarks/python/suite.py $*"
lsio_run python benchmarks/python/suite.py "$@"
