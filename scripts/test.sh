#!/usr/bin/env bash
# Install everything needed, then run all lsio tests: the C++ suite (GoogleTest via ctest)
# and the Python suite (pytest against the installed package), after the layering check
# (scripts/check_layers.py: no upward #include, Python headers only in cpp/bindings/;
# scripts/check_imports.py: no import cycles in python/lsio).
# Run from anywhere:
#
#   bash scripts/test.sh                  # both suites
#   bash scripts/test.sh --cpp-only       # setup + ctest
#   bash scripts/test.sh --python-only    # setup + pip install ".[test]" + pytest
#   bash scripts/test.sh -- -k out_param  # arguments after -- go to pytest
#   bash scripts/test.sh --no-sanitizers  # skip the sanitizer, fuzz, docs and wheel steps (quick local run)
#
# The C++ build includes benchmarks/cpp/lsio_microbench; ctest smoke-runs each of its cases
# once on small inputs (test lsio_microbench_smoke, ~1-5 s) so it cannot rot; no timing is
# checked.
# After pytest, scripts/zarr_suite.py runs a sample of zarr-python's own tests (400, or
# LSIO_ZARR_SUITE_SAMPLE) with zarr's default codec pipeline and with lsio's, and fails when
# a test passing with the default does not pass with lsio's (needs PyPI once: it downloads
# zarr's sdist for its tests/ into ~/.cache/lsio/zarr-suite), and tests/python/
# test_zarr_pipeline.py runs again under zarr-python 3.1.0, the oldest lsio supports.
# After ctest and pytest, the C++ steps (not with --python-only) also run
# scripts/sanitize.sh (ctest under ASan+UBSan; with the Python step also test_goldens and
# test_errors against an ASan+UBSan _core; ctest under TSan for util/io/read; any report
# fails) and scripts/fuzz.sh (corpus replay, then each libFuzzer target for
# LSIO_FUZZ_SECONDS, default 20; any crash fails).
#
# Then (both suites, not with --no-sanitizers) scripts/docs.sh builds the documentation
# (Sphinx, warnings are errors) and the wheel step builds the manylinux wheel for the venv's
# Python only (scripts/build_wheel.sh, which smoke-tests it in a clean venv against
# zarr-python; LSIO_WHEEL_PYTHONS="all" builds and tests CPython 3.10-3.13 instead, about
# 1-2 more minutes per version with a warm ccache) and installs it into a clean debootstrap
# root with no compiler, where it must read the shipped smoke store (scripts/wheel_smoke.sh;
# needs root or passwordless sudo).
#
# Exits non-zero if any step fails, including pytest collecting no tests (exit code 5).
# Ends with one line "summary: N passed, N failed, N skipped" over both suites; a step
# that fails before its tests run (configure, build, install) counts as one failure.
# Environment: see scripts/setup.sh; also LSIO_BUILD_TYPE (default RelWithDebInfo),
# LSIO_FUZZ_SECONDS (default 20), LSIO_TORCH_VERSION (default 2.13.0, installed before the
# test extras; from PyTorch's CPU-only index too on a machine without an NVIDIA GPU, see
# LSIO_TORCH_INDEX in setup.sh), LSIO_WHEEL_PYTHONS (scripts/build_wheel.sh).

set -euo pipefail

run_cpp=1
run_python=1
run_sanitizers=1
pytest_args=()
while [ "$#" -gt 0 ]; do
  case "$1" in
    --cpp-only) run_python=0 ;;
    --python-only) run_cpp=0 ;;
    --no-sanitizers) run_sanitizers=0 ;;
    --) shift; pytest_args=("$@"); break ;;
    -h|--help) sed -n '2,/^$/p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (try --help)" >&2; exit 2 ;;
  esac
  shift
done

# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$LSIO_ROOT"

results_dir="$LSIO_ROOT/build/test-results"
mkdir -p "$results_dir"
rm -f "$results_dir"/ctest.xml "$results_dir"/pytest.xml
failed_steps=()
layers_status="not run"
cpp_status="not run"
python_status="not run"
asan_status="not run"
asanpy_status="not run"
tsan_status="not run"
fuzz_status="not run"
docs_status="not run"
wheel_status="not run"

# ---------------------------------------------------------------- C++: GoogleTest via ctest
run_cpp_tests() {
  local build_dir="$LSIO_ROOT/build/cmake"
  local gen=()
  if command -v ninja >/dev/null 2>&1; then gen=(-G Ninja); fi
  # A tree configured with another generator cannot be reused: start it afresh.
  local cache="$build_dir/CMakeCache.txt"
  if [ -f "$cache" ]; then
    local want="${gen[1]:-Unix Makefiles}"
    if ! grep -qx "CMAKE_GENERATOR:INTERNAL=$want" "$cache"; then
      lsio_log "build/cmake was configured with another generator: wiping it"
      rm -rf "$build_dir"
    fi
  fi
  lsio_log "C++: configure"
  lsio_run cmake -S "$LSIO_ROOT" -B "$build_dir" "${gen[@]}" \
    -DCMAKE_BUILD_TYPE="${LSIO_BUILD_TYPE:-RelWithDebInfo}" -DLSIO_BUILD_TESTS=ON \
    -DLSIO_BUILD_BENCHMARKS=ON \
    -DPython_EXECUTABLE="$(command -v python)" -DPython3_EXECUTABLE="$(command -v python)" \
    -Dpybind11_DIR="$(python -m pybind11 --cmakedir)" || return 1
  lsio_log "C++: build ($(nproc) jobs)"
  lsio_run cmake --build "$build_dir" --parallel "$(nproc)" || return 1
  lsio_log "C++: ctest"
  lsio_run ctest --test-dir "$build_dir" --output-on-failure --no-tests=error \
    --output-junit "$results_dir/ctest.xml" || return 1
}

# ---------------------------------------------------------------- Python: pytest
# test_icechunk.py compares lsio with icechunk 2.x (it writes Icechunk's spec version 2), which
# needs Python >= 3.12: a venv of its own (build/icechunk2-venv) from the machine's CPython 3.12
# or 3.13 (scripts/pythons.sh finds pyenv's), named to the tests in LSIO_ICECHUNK2_PYTHON.
# Without such an interpreter the spec-version-2 tests skip, saying so.
lsio_setup_icechunk2() {
  local py="" v venv="$LSIO_ROOT/build/icechunk2-venv"
  source "$LSIO_ROOT/scripts/pythons.sh"
  for v in 3.12 3.13; do py="$(lsio_find_cpython "$v" || true)"; [ -z "$py" ] || break; done
  if [ -z "$py" ]; then
    echo "no CPython >= 3.12 found: test_icechunk.py's spec-version-2 tests will skip"
    return 0
  fi
  lsio_log "Python: icechunk 2.x for test_icechunk.py ($py, $venv)"
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import sys" >/dev/null 2>&1; then
    rm -rf "$venv"
    lsio_run "$py" -m venv "$venv" || return 1
  fi
  lsio_run "$venv/bin/python" -m pip install -q "icechunk>=2,<3" "zarr>=3.1" numpy || return 1
  export LSIO_ICECHUNK2_PYTHON="$venv/bin/python"
}

run_python_tests() {
  # torch first, pinned: the CPU build of this version is what the test machines carry
  # (a looser spec, or torchdata resolving it, could pull a multi-GB CUDA build). Without an
  # NVIDIA GPU, lsio_pip_install_torch (setup.sh) also looks in PyTorch's CPU-only index.
  if ! python -c "import torch" >/dev/null 2>&1; then
    lsio_pip_install_torch "torch==${LSIO_TORCH_VERSION:-2.13.0}" || return 1
  fi
  lsio_pip_install_package ".[test]" || return 1
  # The tests must exercise the installed package, not the python/lsio sources.
  local where
  where="$(python -c 'import lsio; print(lsio.__file__)')" || return 1
  case "$where" in
    "$VIRTUAL_ENV"/*) echo "import lsio -> $where (installed package)" ;;
    *) echo "error: import lsio resolves to $where, not to the package installed in $VIRTUAL_ENV" \
         "(is PYTHONPATH set?)" >&2
       return 1 ;;
  esac
  lsio_setup_icechunk2 || return 1
  lsio_log "Python: pytest"
  local rc=0
  lsio_run python -m pytest tests/python -ra --junitxml="$results_dir/pytest.xml" \
    "${pytest_args[@]}" || rc=$?
  if [ "$rc" -eq 5 ]; then
    echo "error: pytest collected no tests (exit code 5)" >&2
  fi
  return "$rc"
}

if [ "$run_cpp" = 1 ]; then
  lsio_log "C++: layering check"
  if python scripts/check_layers.py && python scripts/check_imports.py; then layers_status="ok"; else layers_status="FAILED"; failed_steps+=("layering check"); fi
  if run_cpp_tests; then cpp_status="ok"; else cpp_status="FAILED"; failed_steps+=("C++ (ctest)"); fi
fi
zarr_status="not run"
if [ "$run_python" = 1 ]; then
  if run_python_tests; then python_status="ok"; else python_status="FAILED"; failed_steps+=("Python (pytest)"); fi
  # A sample of zarr-python's own tests, with its default codec pipeline and with lsio's:
  # every test passing with the default must pass with lsio's (scripts/zarr_suite.py).
  lsio_log "Python: zarr-python's tests with lsio's codec pipeline (scripts/zarr_suite.py, sampled)"
  if lsio_run python scripts/zarr_suite.py --sample "${LSIO_ZARR_SUITE_SAMPLE:-400}"; then zarr_status="ok"; else zarr_status="FAILED"; failed_steps+=("zarr-python suite"); fi
  # The pipeline's tests again under the oldest zarr-python lsio supports (its read signature
  # and buffer classes differ from the current 3.x): zarr 3.1.0 on PYTHONPATH, ahead of the
  # venv's zarr.
  lsio_log "Python: lsio's codec pipeline under zarr-python 3.1.0 (tests/python/test_zarr_pipeline.py)"
  old_zarr="$(mktemp -d)"
  if lsio_run python -m pip install -q --no-deps --target "$old_zarr" "zarr==3.1.0" crc32c \
     && lsio_run env PYTHONPATH="$old_zarr" python -c "import zarr; assert zarr.__version__ == '3.1.0', zarr.__version__" \
     && lsio_run env PYTHONPATH="$old_zarr" python -m pytest -q -p no:cacheprovider tests/python/test_zarr_pipeline.py; then
    :
  else
    zarr_status="FAILED"; failed_steps+=("zarr-python 3.1.0 pipeline tests")
  fi
  rm -rf "$old_zarr"
fi
# ---------------------------------------------------------------- sanitizers and fuzzing
if [ "$run_cpp" = 1 ] && [ "$run_sanitizers" = 1 ]; then
  lsio_log "C++: ASan + UBSan (scripts/sanitize.sh asan)"
  if bash scripts/sanitize.sh asan; then asan_status="ok"; else asan_status="FAILED"; failed_steps+=("ASan+UBSan"); fi
  if [ "$run_python" = 1 ]; then  # needs the test dependencies installed by the Python step
    lsio_log "Python: _core under ASan + UBSan (scripts/sanitize.sh asan-python)"
    if bash scripts/sanitize.sh asan-python; then asanpy_status="ok"; else asanpy_status="FAILED"; failed_steps+=("ASan+UBSan (Python)"); fi
  fi
  lsio_log "C++: TSan (scripts/sanitize.sh tsan)"
  if bash scripts/sanitize.sh tsan; then tsan_status="ok"; else tsan_status="FAILED"; failed_steps+=("TSan"); fi
  lsio_log "C++: libFuzzer (scripts/fuzz.sh ${LSIO_FUZZ_SECONDS:-20})"
  if bash scripts/fuzz.sh "${LSIO_FUZZ_SECONDS:-20}"; then fuzz_status="ok"; else fuzz_status="FAILED"; failed_steps+=("fuzzing"); fi
fi
# ---------------------------------------------------------------- docs and the wheel
run_wheel_smoke() {
  if [ "$(id -u)" = 0 ]; then
    bash scripts/wheel_smoke.sh
  elif sudo -n true 2>/dev/null; then
    sudo -n env PATH="$PATH" bash scripts/wheel_smoke.sh
  else
    echo "the wheel smoke test needs root or passwordless sudo (debootstrap, chroot)" >&2
    return 1
  fi
}
if [ "$run_cpp" = 1 ] && [ "$run_python" = 1 ] && [ "$run_sanitizers" = 1 ]; then
  lsio_log "Docs: Sphinx build, warnings are errors (scripts/docs.sh)"
  if bash scripts/docs.sh; then docs_status="ok"; else docs_status="FAILED"; failed_steps+=("docs"); fi
  lsio_log "Wheel: build, repair and smoke-test in a clean venv (scripts/build_wheel.sh), then install it in a clean root (scripts/wheel_smoke.sh)"
  if bash scripts/build_wheel.sh && run_wheel_smoke; then wheel_status="ok"; else wheel_status="FAILED"; failed_steps+=("wheel"); fi
fi

# ---------------------------------------------------------------- summary
lsio_log "Summary"
python - "$results_dir" "$layers_status" "$cpp_status" "$python_status" \
  "$asan_status" "$asanpy_status" "$tsan_status" "$fuzz_status" "$docs_status" "$wheel_status" "$zarr_status" <<'PY'
import os
import sys
import xml.etree.ElementTree as ET

results_dir, layers_status, cpp_status, python_status = sys.argv[1:5]
step_statuses = dict(zip(("asan", "asan-py", "tsan", "fuzz", "docs", "wheel", "zarr"), sys.argv[5:12]))


def count(path):
    """(passed, failed, skipped) from a JUnit XML file written by ctest or pytest."""
    passed = failed = skipped = 0
    for case in ET.parse(path).getroot().iter("testcase"):
        tags = {child.tag for child in case}
        status = case.get("status", "")
        if tags & {"failure", "error"} or status == "fail":
            failed += 1
        elif "skipped" in tags or status in ("notrun", "disabled"):
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped


total = [0, 0, 0]
if layers_status != "not run":
    print(f"  {'layers':6}  {layers_status}")
    if layers_status != "ok":
        total[1] += 1
for name, status, xml in (("ctest", cpp_status, "ctest.xml"), ("pytest", python_status, "pytest.xml")):
    if status == "not run":
        print(f"  {name:6}  not run")
        continue
    path = os.path.join(results_dir, xml)
    p = f = s = 0
    if os.path.exists(path):
        p, f, s = count(path)
    if status != "ok" and f == 0:
        f = 1  # failed before or outside its tests (configure, build, install, collection)
    total = [total[0] + p, total[1] + f, total[2] + s]
    print(f"  {name:6}  {status:6}  {p} passed, {f} failed, {s} skipped")
for name, status in step_statuses.items():
    if status == "not run":
        continue
    print(f"  {name:7} {status}")  # like layers: a failed step counts as one failure
    if status != "ok":
        total[1] += 1
print(f"summary: {total[0]} passed, {total[1]} failed, {total[2]} skipped")
PY

if [ "${#failed_steps[@]}" -gt 0 ]; then
  echo "FAILED: ${failed_steps[*]}" >&2
  exit 1
fi
