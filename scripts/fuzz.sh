#!/usr/bin/env bash
# Build the libFuzzer targets (tests/fuzz/) with clang into build/fuzz and fuzz each one for
# a bounded time.
#
#   bash scripts/fuzz.sh            # 30 s per target
#   bash scripts/fuzz.sh 300        # 5 min per target
#
# Steps: 1. configure with CC=clang CXX=clang++ -DLSIO_BUILD_FUZZERS=ON (core libraries with
# -fsanitize=fuzzer-no-link,address,undefined); 2. build the three targets; 3. ctest replays the
# committed corpora (tests/fuzz/corpus/<target>/, seeds + past crashes) as regression tests;
# 4. each target fuzzes for the given seconds from a copy of its corpus in
# build/fuzz/work/<target> (the committed corpus is never modified), with -rss_limit_mb=2048.
# Prints the executions per target. A crash, leak, timeout or OOM fails the script and leaves
# its input in build/fuzz/artifacts/; commit it as tests/fuzz/corpus/<target>/crash-<what>
# (replayed by ctest from then on) once the bug is fixed.
# Needs clang-16 and libclang-rt-16-dev (scripts/setup.sh installs them; LSIO_FUZZ_CC/CXX override) and cmake/ninja on PATH.

set -euo pipefail

LSIO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$LSIO_ROOT"
seconds="${1:-30}"
targets=(metadata_fuzzer shard_index_fuzzer codec_chain_fuzzer node_fuzzer kerchunk_fuzzer icechunk_fuzzer)
dir="$LSIO_ROOT/build/fuzz"
gen=()
if command -v ninja >/dev/null 2>&1; then gen=(-G Ninja); fi
log() { printf '\n==> %s\n' "$*"; }

# clang >= 15: the engine uses _Float16, which clang 14 (Debian 12's default) lacks on x86.
cc="${LSIO_FUZZ_CC:-clang-16}"
cxx="${LSIO_FUZZ_CXX:-clang++-16}"
command -v "$cxx" >/dev/null 2>&1 ||
  { echo "error: $cxx not found (apt-get install clang-16 libclang-rt-16-dev, or set LSIO_FUZZ_CXX)" >&2; exit 1; }
if [ -f "$dir/CMakeCache.txt" ] && ! grep -qx "CMAKE_GENERATOR:INTERNAL=${gen[1]:-Unix Makefiles}" "$dir/CMakeCache.txt"; then
  rm -rf "$dir"
fi
t0=$SECONDS
log "fuzz: configure ($cxx, -DLSIO_BUILD_FUZZERS=ON)"
CC="$cc" CXX="$cxx" cmake -S "$LSIO_ROOT" -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DLSIO_BUILD_FUZZERS=ON -DLSIO_BUILD_TESTS=OFF -DLSIO_BUILD_PYTHON=OFF >/dev/null
log "fuzz: build"
build_targets=()
for t in "${targets[@]}"; do build_targets+=(--target "$t"); done
cmake --build "$dir" --parallel "$(nproc)" "${build_targets[@]}"
log "fuzz: replay the committed corpora (ctest)"
ctest --test-dir "$dir" --output-on-failure --no-tests=error

status=0
summary=()
mkdir -p "$dir/artifacts"
for t in "${targets[@]}"; do
  work="$dir/work/$t"
  mkdir -p "$work"
  cp -n "$LSIO_ROOT/tests/fuzz/corpus/$t"/* "$work"/ 2>/dev/null || true
  dict=()
  if [ -f "$LSIO_ROOT/tests/fuzz/$t.dict" ]; then dict=("-dict=$LSIO_ROOT/tests/fuzz/$t.dict"); fi
  log "fuzz: $t for $seconds s"
  rc=0
  "$dir/tests/fuzz/$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 \
    -artifact_prefix="$dir/artifacts/$t-" "${dict[@]}" "$work" >"$dir/$t.log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/$t.log" | tail -1)
  if [ "$rc" -ne 0 ]; then
    tail -n 60 "$dir/$t.log" >&2
    echo "error: $t failed (exit $rc); reproducer in $dir/artifacts/ (log: $dir/$t.log)" >&2
    summary+=("$t: FAILED after ${execs:-?} executions")
    status=1
  else
    summary+=("$t: ok, ${execs:-?} executions in $seconds s, corpus $(find "$work" -type f | wc -l) inputs")
  fi
done
log "fuzz summary ($((SECONDS - t0)) s)"
printf '  %s\n' "${summary[@]}"
exit "$status"
