#!/usr/bin/env bash
# Build the C++ core and its GoogleTest suites with sanitizers and run them under ctest.
#
#   bash scripts/sanitize.sh            # asan then tsan
#   bash scripts/sanitize.sh asan       # ASan + UBSan over every suite   (build/asan)
#   bash scripts/sanitize.sh tsan       # TSan over the util, io (pread and io_uring), net, read
#                                       # and fault suites (build/tsan)
#   bash scripts/sanitize.sh asan-python  # the _core extension under ASan + UBSan (build/asan):
#                                       # tests/python/test_goldens.py, test_errors.py,
#                                       # test_file_changes.py, test_remote_http.py (the HTTP
#                                       # client and store under every fault) and
#                                       # test_interrupt.py's signal
#                                       # handler and exit tests (children inherit ASan), pread
#                                       # backend, with libasan/libubsan preloaded into python
#
# The C++ modes build no Python extension (-DLSIO_BUILD_PYTHON=OFF). Every sanitizer writes its reports to
# build/<dir>/sanitizer-reports/ (one file per process, forked children included); the step
# fails if a test fails OR any report was written, and prints the reports. Nothing is
# suppressed: a report is a bug to fix in the engine (or in the test).
# Expects the tools of scripts/setup.sh (sourced by scripts/test.sh; run it standalone
# after `source scripts/setup.sh`, or with cmake/ninja/g++ on PATH).
# Environment: LSIO_SANITIZE_JOBS (ctest -j, default nproc); LSIO_SANITIZE_BUILD_ROOT (where the
# build/<dir> trees go, default build/ in the repository: lets several checkouts or sessions
# share one repository without sharing build trees).

set -euo pipefail

LSIO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$LSIO_ROOT"
modes=("$@")
[ "${#modes[@]}" -gt 0 ] || modes=(asan tsan)
jobs="${LSIO_SANITIZE_JOBS:-$(nproc)}"
build_root="${LSIO_SANITIZE_BUILD_ROOT:-$LSIO_ROOT/build}"
gen=()
if command -v ninja >/dev/null 2>&1; then gen=(-G Ninja); fi

opt_flags="-O1 -g -DNDEBUG"
log() { printf '\n==> %s\n' "$*"; }

# run_mode NAME SANITIZERS CTEST_FILTER TARGETS...
run_mode() {
  local name="$1" sanitize="$2" filter="$3"
  shift 3
  local dir="$build_root/$name" reports="$build_root/$name/sanitizer-reports"
  local t0=$SECONDS
  # A tree configured with another generator cannot be reused.
  if [ -f "$dir/CMakeCache.txt" ] && ! grep -qx "CMAKE_GENERATOR:INTERNAL=${gen[1]:-Unix Makefiles}" "$dir/CMakeCache.txt"; then
    rm -rf "$dir"
  fi
  log "$name: configure (-DLSIO_SANITIZE=$sanitize)"
  # -O1: the usual sanitizer optimisation level; compiles ~1/3 faster than -O2 here.
  cmake -S "$LSIO_ROOT" -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$opt_flags" \
    -DLSIO_BUILD_TESTS=ON -DLSIO_BUILD_PYTHON=OFF -DLSIO_SANITIZE="$sanitize" >/dev/null
  log "$name: build ${*:-all} ($(nproc) jobs)"
  local targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  cmake --build "$dir" --parallel "$(nproc)" "${targets[@]}"
  rm -rf "$reports"
  mkdir -p "$reports"
  local common="log_path=$reports/report:print_summary=1"
  log "$name: ctest"
  local rc=0
  # The sanitizers slow the suites down a few times: lift the per-test 60 s limit.
  ASAN_OPTIONS="$common:halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1" \
  UBSAN_OPTIONS="$common:halt_on_error=1:print_stacktrace=1" \
  TSAN_OPTIONS="$common:halt_on_error=0:second_deadlock_stack=1" \
    ctest --test-dir "$dir" --output-on-failure --no-tests=error -j "$jobs" \
      --timeout 600 -E "$filter" || rc=$?
  local n
  n=$(find "$reports" -type f | wc -l)
  if [ "$n" -gt 0 ]; then
    echo "error: $name: $n sanitizer report(s):" >&2
    for f in "$reports"/*; do echo "---- $f" >&2; cat "$f" >&2; done
    rc=1
  fi
  if [ "$rc" -eq 0 ]; then
    log "$name: ok, 0 reports ($((SECONDS - t0)) s)"
  else
    log "$name: FAILED ($((SECONDS - t0)) s)"
  fi
  return "$rc"
}

# The extension built with ASan + UBSan, imported from build/asan/pkg (ahead of the
# installed package on PYTHONPATH) by a python with the runtimes preloaded. Leak checking is
# off: CPython and numpy keep allocations until exit by design.
run_asan_python() {
  # Shares build/asan (same flags): after `asan`, only the three binding files compile.
  local dir="$build_root/asan" reports="$build_root/asan/sanitizer-reports-py"
  local t0=$SECONDS py
  py="$(command -v python)"
  log "asan-python: configure + build _core"
  cmake -S "$LSIO_ROOT" -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$opt_flags" \
    -DLSIO_BUILD_TESTS=ON -DLSIO_BUILD_PYTHON=ON -DLSIO_SANITIZE=address,undefined \
    -DPython_EXECUTABLE="$py" -Dpybind11_DIR="$("$py" -m pybind11 --cmakedir)" >/dev/null
  cmake --build "$dir" --parallel "$(nproc)" --target _core
  rm -rf "$dir/pkg" "$reports"
  mkdir -p "$dir/pkg" "$reports"
  cp -r "$LSIO_ROOT/python/lsio" "$dir/pkg/lsio"
  cp "$dir"/_core*.so "$dir/pkg/lsio/"
  log "asan-python: pytest (test_goldens, test_errors, test_file_changes, test_remote_http, signal handlers and exit in test_interrupt; LSIO_IO=pread)"
  local rc=0
  LD_PRELOAD="$(g++ -print-file-name=libasan.so) $(g++ -print-file-name=libubsan.so)" \
  ASAN_OPTIONS="log_path=$reports/report:detect_leaks=0:halt_on_error=1:suppressions=$LSIO_ROOT/scripts/asan.supp" \
  UBSAN_OPTIONS="log_path=$reports/report:halt_on_error=1:print_stacktrace=1" \
  PYTHONPATH="$dir/pkg" LSIO_IO=pread \
    "$py" -m pytest -q -p no:cacheprovider -k "not uring and not ctrl_c" \
      "$LSIO_ROOT/tests/python/test_goldens.py" "$LSIO_ROOT/tests/python/test_errors.py" \
      "$LSIO_ROOT/tests/python/test_file_changes.py" "$LSIO_ROOT/tests/python/test_interrupt.py" \
      "$LSIO_ROOT/tests/python/test_remote_http.py" || rc=$?
  local n
  n=$(find "$reports" -type f | wc -l)
  if [ "$n" -gt 0 ]; then
    echo "error: asan-python: $n sanitizer report(s):" >&2
    for f in "$reports"/*; do echo "---- $f" >&2; cat "$f" >&2; done
    rc=1
  fi
  if [ "$rc" -eq 0 ]; then log "asan-python: ok, 0 reports ($((SECONDS - t0)) s)"; else log "asan-python: FAILED ($((SECONDS - t0)) s)"; fi
  return "$rc"
}

status=0
for mode in "${modes[@]}"; do
  case "$mode" in
    asan) run_mode asan address,undefined '_NOT_BUILT' || status=1 ;;
    # Only the concurrent layers (net: Run from several threads over a shared CURLSH, and
    # the fault suite, whose reads run on 2-4 workers);
    # tests of binaries not built are excluded by -E. The io_uring cases run too: the
    # backend tells TSan about the rings liburing maps with raw syscalls (uring_backend.cc,
    # TsanRingMapped / TsanRingUnmapping), which TSan would otherwise take for races between
    # threads whose rings reused the same pages.
    tsan) run_mode tsan thread '_NOT_BUILT' lsio_util_test lsio_io_test lsio_net_test lsio_read_test lsio_fault_test || status=1 ;;
    asan-python) run_asan_python || status=1 ;;
    *) echo "unknown mode: $mode (asan | tsan | asan-python)" >&2; exit 2 ;;
  esac
done
exit "$status"
