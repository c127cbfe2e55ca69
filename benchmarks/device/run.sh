#!/usr/bin/env bash
# One-shot GPU run: build lsio offline, the CUDA tests, GPU decode, GPU feed, then the suite's
# thread scaling. Run from the repository root:
#
#   bash benchmarks/device/run.sh              # on the GPU machine (device tool, carry .offline and .whl)
#   bash benchmarks/device/run.sh --cpu-smoke  # on a CPU-only machine: the same steps on tiny sizes,
#                                              # no build (an existing build/cmake/_core*.so), to check
#                                              # the script's plumbing; also LSIO_DEVICE_SMOKE=1
#
# Steps, most important first. Each runs under its own `timeout` (capped by what is left of
# the whole budget, LSIO_DEVICE_BUDGET_S, default 540 s); a failed or timed-out step is logged
# with its exit status and the next one runs (no `set -e`):
#   setup       CMAKE_ARGS=-DLSIO_STATIC_DEPS=ON (Debian's archives from .offline/debs) and
#               `source .offline/setup.sh` (unpacks .offline into /tmp/sys, builds lsio into
#               /tmp/site); on failure once more with shared libraries. Then only the libraries
#               _core needs and the machine lacks (ldd) go on LD_LIBRARY_PATH (/tmp/lsio-libs),
#               so torch/TensorStore never bind to Debian's copies. The nvCOMP wheel from .whl/
#               goes into /tmp/site (nvidia.libnvcomp). Prints nvidia-smi, versions and
#               lsio.gpu.available().
#   tests       pytest tests/python/test_gpu.py (junit XML to $OUT/test_gpu.xml)
#   store       W1's store (benchmarks/python/stores.py) into $CACHE, outside the timed steps
#   gpu_decode  benchmarks/python/gpu_decode.py (cpu vs gpu decode) -> $OUT/gpu_decode.json
#   gpu_feed    benchmarks/python/gpu_feed.py, every mode incl. lsio.gpu -> $OUT/gpu_feed.json
#   gpu_decode_full   gpu_decode.py --full (whole array per batch) -> $OUT/gpu_decode_full.json
#   stores      the suite's W4/W5 stores
#   suite T     suite.py --only W1,W4,W5 --readers lsio,tensorstore --rounds 3 --threads T for
#               T = 16, 1, 2, 4, 8 (that order: the ends first) -> $OUT/suite.md (the tables)
#   scaling     scaling.py (lsio alone, serial share of a call) if time is left
#   then suite.json ({threads: results.json, "scaling": ...}) and a summary of every step.
# LSIO_DEVICE_STEPS=pipeline runs instead: setup, tests, gpu_feed without a model (batch 64:
# W1's delivered GB/s, CropLoader depth 2 / depth 1 / the CPU path) -> $OUT/feed_nomodel.json,
# gpu_feed at 4 threads with an 11 ms step -> feed_t4.json, gpu_decode on gzip and LZ4 copies of
# the small W1 store -> decode_gzip.json, decode_lz4.json, gpu_feed at THREADS -> feed_t16.json.
# LSIO_DEVICE_STEPS=custom: setup, tests, then `bash -c "$LSIO_DEVICE_CMD"` (a follow-up).
# LSIO_DEVICE_STEPS=probe runs a short second pass instead: setup, tests, benchmarks/device/
# probe.py (phases of a batch on the GPU, nvCOMP and a corrupt frame) -> $OUT/probe.json and
# gpu_feed.py at 4 threads with a 10 ms step -> $OUT/gpu_feed_t4.json.
# Output in $OUT (default /tmp/lsio-device-out, smoke /tmp/lsio-device-smoke-out), at most 8
# files: log.txt (everything, via tee), test_gpu.xml, gpu_decode.json, gpu_decode_full.json,
# gpu_feed.json, suite.md, suite.json, and build.log only when the build failed.
# Environment: OUT, LSIO_DEVICE_BUDGET_S, LSIO_BENCH_CACHE (stores; default /tmp/bcache, smoke
# /tmp/lsio-smoke-cache), LSIO_WHL_DIR (default .whl), LSIO_BUILD_DIR (smoke: where _core*.so
# is; default build/cmake), PYTHON (default python3), THREADS (default: CPUs).

set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 2
ROOT=$PWD

SMOKE=${LSIO_DEVICE_SMOKE:-0}
for a in "$@"; do
  case "$a" in
    --cpu-smoke) SMOKE=1 ;;
    -h|--help) sed -n '2,/^$/p' "$0"; exit 0 ;;
    *) echo "unknown argument: $a (try --help)" >&2; exit 2 ;;
  esac
done

if [ "$SMOKE" = 1 ]; then
  OUT=${OUT:-/tmp/lsio-device-smoke-out}
  CACHE=${LSIO_BENCH_CACHE:-/tmp/lsio-smoke-cache}
  SITE=/tmp/lsio-smoke-site
else
  OUT=${OUT:-/tmp/lsio-device-out}
  CACHE=${LSIO_BENCH_CACHE:-/tmp/bcache}
  SITE=/tmp/site
fi
BUDGET=${LSIO_DEVICE_BUDGET_S:-540}
WHL=${LSIO_WHL_DIR:-.whl}
PY=${PYTHON:-python3}
NCPU=$(nproc)
THREADS=${THREADS:-$NCPU}
T0=$(date +%s)
export PYTHONUNBUFFERED=1
mkdir -p "$OUT" "$CACHE"

STATUS=()
FAILED=0

left() { echo $(( T0 + BUDGET - $(date +%s) )); }

# step NAME CAP_SECONDS COMMAND...: runs COMMAND under timeout min(CAP, what is left).
step() {
  local name=$1 cap=$2
  shift 2
  local l t s rc d
  l=$(left)
  t=$(( cap < l ? cap : l ))
  if [ "$t" -lt 15 ]; then
    echo; echo "### $name: SKIPPED (${l}s of the budget left)"
    STATUS+=("$name: skipped, out of time")
    FAILED=1
    return 0
  fi
  echo; echo "### $name: start $(date -u +%T), timeout ${t}s, $(( $(date +%s) - T0 ))s into the run"
  echo "+ $*"
  s=$(date +%s)
  timeout -k 10 "$t" "$@" </dev/null
  rc=$?
  d=$(( $(date +%s) - s ))
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "### $name: TIMED OUT after ${t}s (exit $rc)"
    STATUS+=("$name: TIMED OUT after ${d}s (cap ${t}s)")
  else
    echo "### $name: exit $rc in ${d}s"
    STATUS+=("$name: exit $rc in ${d}s")
  fi
  [ "$rc" = 0 ] || FAILED=1
  return 0
}

note() { STATUS+=("$*"); echo "### $*"; }

# ------------------------------------------------------------------------------------ setup
setup_device() {
  local orig_ld=${LD_LIBRARY_PATH:-} L=/tmp/sys/usr/lib/x86_64-linux-gnu rc s
  s=$(date +%s)
  if [ ! -d .offline ]; then
    note "setup: no .offline/ (carry it): cannot build"; FAILED=1; return 1
  fi
  # The build runs in a child shell under timeout; the env is sourced afterwards (the build is
  # then skipped: /tmp/site/.lsio-ok).
  CMAKE_ARGS="-DLSIO_STATIC_DEPS=ON -DLSIO_URING_ARCHIVE=$L/liburing.a -DLSIO_ZSTD_ARCHIVE=$L/libzstd.a"
  CMAKE_ARGS+=" -DLSIO_LZ4_ARCHIVE=$L/liblz4.a -DLSIO_ZLIB_ARCHIVE=$L/libz.a"
  export CMAKE_ARGS
  echo "+ CMAKE_ARGS='$CMAKE_ARGS' source .offline/setup.sh"
  timeout -k 10 240 bash -c 'source .offline/setup.sh' </dev/null
  rc=$?
  if [ "$rc" != 0 ]; then
    echo "### setup: the build with LSIO_STATIC_DEPS=ON failed (exit $rc); again with shared libraries"
    cp /tmp/lsio-build.log "$OUT/build.log" 2>/dev/null
    rm -rf /tmp/lsio-build
    export CMAKE_ARGS="-DLSIO_STATIC_DEPS=OFF"
    timeout -k 10 180 bash -c 'source .offline/setup.sh' </dev/null
    rc=$?
    [ "$rc" = 0 ] && note "setup: built WITHOUT LSIO_STATIC_DEPS (the static build failed: build.log)"
  fi
  unset CMAKE_ARGS
  if [ "$rc" != 0 ] || [ ! -f /tmp/site/.lsio-ok ]; then
    cp /tmp/lsio-build.log "$OUT/build.log" 2>/dev/null
    note "setup: BUILD FAILED (exit $rc; $OUT/build.log); the next steps will fail to import lsio"
    FAILED=1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    return 1
  fi
  # shellcheck disable=SC1091
  source .offline/setup.sh
  # Run time: only what _core lacks on this machine, from /tmp/sys (closure via ldd).
  local so missing m f i
  so=$(ls /tmp/site/lsio/_core*.so 2>/dev/null | head -1)
  mkdir -p /tmp/lsio-libs
  for i in 1 2 3 4 5; do
    # shellcheck disable=SC2086
    missing=$(LD_LIBRARY_PATH=/tmp/lsio-libs${orig_ld:+:$orig_ld} ldd "$so" /tmp/lsio-libs/*.so* 2>/dev/null \
              | awk '/not found/ {print $1}' | sort -u)
    [ -z "$missing" ] && break
    for m in $missing; do
      f=$(ls /tmp/sys/usr/lib/x86_64-linux-gnu/"$m" /tmp/sys/lib/x86_64-linux-gnu/"$m" 2>/dev/null | head -1)
      if [ -n "$f" ]; then cp -L "$f" /tmp/lsio-libs/; else echo "setup: $m is needed but not in .offline"; fi
    done
  done
  export LD_LIBRARY_PATH=/tmp/lsio-libs${orig_ld:+:$orig_ld}
  echo "setup: _core = $so; from .offline at run time: $(ls /tmp/lsio-libs | tr '\n' ' ')"
  LD_LIBRARY_PATH=$LD_LIBRARY_PATH ldd "$so" | sed 's/^/  ldd: /'
  STATUS+=("setup (build): ok in $(( $(date +%s) - s ))s")
}

setup_smoke() {
  local so
  so=$(ls "${LSIO_BUILD_DIR:-build/cmake}"/_core*.so 2>/dev/null | head -1)
  if [ -z "$so" ]; then
    note "setup (smoke): no ${LSIO_BUILD_DIR:-build/cmake}/_core*.so: build lsio first (or set LSIO_BUILD_DIR)"
    FAILED=1
  else
    ln -sf "$(readlink -f "$so")" python/lsio/
    echo "setup (smoke): python/lsio -> $so (no build)"
  fi
  export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH}
  STATUS+=("setup (smoke, no build): done")
}

install_nvcomp() {
  local whls
  whls=$(ls "$WHL"/*.whl 2>/dev/null)
  if [ -z "$whls" ]; then
    note "nvcomp: no wheels in $WHL/ (carry .whl): lsio.gpu will not find libnvcomp"
    return 0
  fi
  mkdir -p "$SITE"
  # shellcheck disable=SC2086
  step "nvcomp wheel -> $SITE" 120 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target "$SITE" $whls
  case ":${PYTHONPATH:-}:" in *":$SITE:"*) ;; *) export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH} ;; esac
  if [ -d "$SITE/nvidia/libnvcomp/lib64" ]; then
    export LD_LIBRARY_PATH=$SITE/nvidia/libnvcomp/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
  # A regular package `nvidia` (with __init__.py) elsewhere on sys.path would hide
  # /tmp/site/nvidia/libnvcomp: then link it into that package.
  if ! "$PY" -c "import nvidia.libnvcomp" 2>/dev/null && [ -d "$SITE/nvidia/libnvcomp" ]; then
    local pkg
    pkg=$("$PY" -c "import nvidia, os; print(os.path.dirname(nvidia.__file__) if getattr(nvidia, '__file__', None) else '')" 2>/dev/null)
    if [ -n "$pkg" ] && [ -w "$pkg" ]; then
      ln -sfn "$SITE/nvidia/libnvcomp" "$pkg/libnvcomp" && echo "nvcomp: linked into $pkg (a regular nvidia package hid it)"
    fi
  fi
  "$PY" -c "import nvidia.libnvcomp as m; print('nvidia.libnvcomp', m.__version__, m.__path__[0], m.load_library())" \
    || echo "nvcomp: nvidia.libnvcomp NOT importable"
}

print_env() {
  echo "### environment"
  echo "date: $(date -u)  host: $(hostname)  kernel: $(uname -r)  cpus: $NCPU  threads: $THREADS"
  grep -m1 'model name' /proc/cpuinfo 2>/dev/null
  free -g 2>/dev/null | head -2
  df -h /tmp 2>/dev/null | tail -1
  if command -v nvidia-smi >/dev/null 2>&1; then timeout 30 nvidia-smi; else echo "nvidia-smi: not found"; fi
  timeout 60 "$PY" - <<'PY'
import sys
print("python", sys.version.split()[0], sys.executable)
for name in ("numpy", "torch", "triton", "cupy", "tensorstore", "zarr", "zarrs", "numcodecs", "psutil"):
    try:
        m = __import__(name)
        print(f"{name} {getattr(m, '__version__', '?')}")
    except Exception as e:  # noqa: BLE001
        print(f"{name}: {type(e).__name__}: {e}")
try:
    import torch
    print("torch.cuda.is_available()", torch.cuda.is_available(), "cuda", torch.version.cuda,
          torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
except Exception as e:  # noqa: BLE001
    print("torch.cuda:", e)
try:
    import lsio
    print("lsio", lsio.__version__, lsio.__file__)
except Exception as e:  # noqa: BLE001
    print("lsio NOT importable:", type(e).__name__, e)
PY
  echo "+ $PY -c 'import lsio.gpu; print(lsio.gpu.available())'"
  timeout 60 "$PY" -c "import lsio.gpu; print(lsio.gpu.available())" 2>&1 | tail -20
}

# ------------------------------------------------------------------------------------ steps
main() {
  echo "lsio device run ($([ "$SMOKE" = 1 ] && echo 'CPU SMOKE: tiny sizes, not a measurement' || echo device)):" \
       "budget ${BUDGET}s, OUT=$OUT, cache $CACHE, root $ROOT"
  if [ "$SMOKE" = 1 ]; then setup_smoke; else setup_device; fi
  install_nvcomp
  print_env

  local B=benchmarks/python dq=() fq=() sq=() st=(16 1 2 4 8) t
  if [ "$SMOKE" = 1 ]; then
    dq=(--device cpu --quick --threads 2 --batch 8 --batches 2 --rounds 1 --warmup 1 --check 2 --gpu-threads 1)
    fq=(--device cpu --quick --threads 2 --workers 1 --batch 8 --batches 3)
    sq=(--quick --rounds 1)
    st=(2 1)
  else
    dq=(--threads "$THREADS" --gpu-threads 1,2,4)
    fq=(--threads "$THREADS" --workers 8 --batches 150)
    sq=(--rounds 3)
  fi

  if [ -f tests/python/test_gpu.py ]; then
    step "tests (test_gpu.py)" 150 "$PY" -m pytest -q -rs -p no:cacheprovider --durations=5 \
      --junitxml="$OUT/test_gpu.xml" tests/python/test_gpu.py
  else
    note "tests: tests/python/test_gpu.py not in this tree: skipped"; FAILED=1
  fi

  if [ "${LSIO_DEVICE_STEPS:-all}" = probe ]; then
    # A second, short run: tests, where a batch's GPU time goes and what nvCOMP does with a
    # corrupt frame (probe.py), and the feed with 4 loading threads and a 10 ms step (the
    # CPU kept mostly free for the rest of a training job).
    step "store (W1)" 120 "$PY" -c "import sys; sys.path.insert(0, '$B'); from stores import ensure_store; \
from suite import STORES; print(ensure_store(STORES['weather'][0], '$CACHE'))"
    [ "${LSIO_DEVICE_PROBE:-1}" = 1 ] && step "probe" 120 "$PY" benchmarks/device/probe.py --cache-dir "$CACHE" --json "$OUT/probe.json"
    step "gpu_feed threads=4 step=10ms" 150 "$PY" $B/gpu_feed.py --threads 4 --workers 4 --batches 100 --step-ms 10 \
      --modes lsio,lsio.torch,lsio.gpu --cache-dir "$CACHE" --json "$OUT/gpu_feed_t4.json"
    echo; echo "### summary ($(( $(date +%s) - T0 ))s of ${BUDGET}s)"
    for s in "${STATUS[@]}"; do echo "  $s"; done
    return "$FAILED"
  fi

  if [ "${LSIO_DEVICE_STEPS:-all}" = custom ]; then
    # A follow-up on a warm machine: the environment above, then LSIO_DEVICE_CMD.
    step "custom" "$(left)" bash -c "$LSIO_DEVICE_CMD"
    echo; echo "### summary ($(( $(date +%s) - T0 ))s of ${BUDGET}s)"
    for s in "${STATUS[@]}"; do echo "  $s"; done
    return "$FAILED"
  fi

  if [ "${LSIO_DEVICE_STEPS:-all}" = pipeline ]; then
    # The pipelined GPU path (CropLoader depth 2 against depth 1 and the CPU path), then
    # nvCOMP's deflate and LZ4 on gzip / LZ4 copies of the small W1 store.
    local pf=() q=() w1=0
    if [ "$SMOKE" = 1 ]; then
      pf=(--device cpu --quick --batches 3 --warmup 1); q=(--device cpu --batches 2 --rounds 1 --warmup 1 --check 2)
      w1=1
    else
      pf=(--batches 100); q=(--batches 20 --rounds 3 --gpu-threads 4)
    fi
    step "store (W1)" 120 "$PY" -c "import sys; sys.path.insert(0, '$B'); from stores import ensure_store; \
from suite import STORES; print(ensure_store(STORES['weather'][$w1], '$CACHE'))"
    step "gpu_feed no model, batch 64, threads=$THREADS" 110 "$PY" $B/gpu_feed.py "${pf[@]}" --no-model --batch 64 \
      --threads "$THREADS" --modes lsio,lsio.gpu,lsio.gpu.depth1 --cache-dir "$CACHE" --json "$OUT/feed_nomodel.json"
    step "gpu_feed threads=4 step=11ms" 130 "$PY" $B/gpu_feed.py "${pf[@]}" --threads 4 --workers 4 --step-ms 11 \
      --modes lsio,lsio.torch,lsio.gpu,lsio.gpu.depth1 --cache-dir "$CACHE" --json "$OUT/feed_t4.json"
    step "gpu_decode gzip (small W1)" 70 "$PY" $B/gpu_decode.py "${q[@]}" --quick --codec gzip --threads "$THREADS" \
      --cache-dir "$CACHE" --json "$OUT/decode_gzip.json"
    step "gpu_decode lz4 (small W1)" 70 "$PY" $B/gpu_decode.py "${q[@]}" --quick --codec lz4 --threads "$THREADS" \
      --cache-dir "$CACHE" --json "$OUT/decode_lz4.json"
    step "gpu_feed threads=$THREADS" 110 "$PY" $B/gpu_feed.py "${pf[@]}" --threads "$THREADS" --workers 8 \
      --modes lsio,lsio.gpu,lsio.gpu.depth1 --cache-dir "$CACHE" --json "$OUT/feed_t16.json"
    echo; echo "### summary ($(( $(date +%s) - T0 ))s of ${BUDGET}s)"
    for s in "${STATUS[@]}"; do echo "  $s"; done
    echo "files in $OUT:"; ls -la "$OUT" | tail -n +2
    return "$FAILED"
  fi

  step "store (W1)" 120 "$PY" -c "import sys; sys.path.insert(0, '$B'); from stores import ensure_store; \
from suite import STORES; print(ensure_store(STORES['weather'][$([ "$SMOKE" = 1 ] && echo 1 || echo 0)], '$CACHE'))"

  step "gpu_decode" 100 "$PY" $B/gpu_decode.py "${dq[@]}" --cache-dir "$CACHE" --json "$OUT/gpu_decode.json"
  step "gpu_feed" 120 "$PY" $B/gpu_feed.py "${fq[@]}" --modes lsio,lsio.torch,lsio.gpu,lsio.gpu.manual,tensorstore,zarrs \
    --cache-dir "$CACHE" --json "$OUT/gpu_feed.json"
  if [ "$SMOKE" = 1 ]; then
    step "gpu_decode --full" 60 "$PY" $B/gpu_decode.py "${dq[@]}" --full --box 8,512,512 --batches 1 \
      --cache-dir "$CACHE" --json "$OUT/gpu_decode_full.json"
  else
    step "gpu_decode --full" 60 "$PY" $B/gpu_decode.py "${dq[@]}" --full --cache-dir "$CACHE" \
      --json "$OUT/gpu_decode_full.json"
  fi

  step "stores (W4, W5)" 150 "$PY" -c "import sys; sys.path.insert(0, '$B'); from stores import ensure_store; \
from suite import STORES; [print(ensure_store(STORES[k][$([ "$SMOKE" = 1 ] && echo 1 || echo 0)], '$CACHE')) for k in ('tiles', 'full')]"

  : > "$OUT/suite.md"
  for t in "${st[@]}"; do
    rm -rf "/tmp/lsio-suite-$t"
    step "suite W1,W4,W5 threads=$t" "$([ "$t" = 1 ] || [ "$t" = 16 ] && echo 110 || echo 80)" \
      "$PY" $B/suite.py "${sq[@]}" --only W1,W4,W5 --readers lsio,tensorstore --threads "$t" \
      --cache-dir "$CACHE" --out "/tmp/lsio-suite-$t" --no-plot
    if [ -f "/tmp/lsio-suite-$t/results.md" ]; then
      { echo "# threads = $t"; echo; cat "/tmp/lsio-suite-$t/results.md"; echo; } >> "$OUT/suite.md"
    else
      echo "# threads = $t: no results (see log.txt)" >> "$OUT/suite.md"
    fi
  done

  if [ "$SMOKE" = 1 ]; then
    step "scaling" 60 "$PY" $B/scaling.py --threads 1,2 --rounds 1 --workloads W4,W5 --cache-dir "$CACHE" \
      --json /tmp/lsio-scaling.json
  elif [ "$(left)" -ge 60 ]; then
    step "scaling" 90 "$PY" $B/scaling.py --threads 1,2,4,8,16 --rounds 3 --full --cache-dir "$CACHE" \
      --json /tmp/lsio-scaling.json
  else
    note "scaling: skipped ($(left)s left)"
  fi

  "$PY" - "$OUT/suite.json" "${st[@]}" <<'PY'
import json, os, sys
out, threads = sys.argv[1], sys.argv[2:]
doc = {}
for t in threads:
    p = f"/tmp/lsio-suite-{t}/results.json"
    if os.path.exists(p):
        doc[t] = json.load(open(p))
if os.path.exists("/tmp/lsio-scaling.json"):
    doc["scaling"] = json.load(open("/tmp/lsio-scaling.json"))
json.dump(doc, open(out, "w"), indent=1, default=str)
print(f"suite.json: threads {[t for t in threads if t in doc]}, scaling {'scaling' in doc}")
PY

  echo; echo "### summary ($(( $(date +%s) - T0 ))s of ${BUDGET}s)"
  local s
  for s in "${STATUS[@]}"; do echo "  $s"; done
  echo "files in $OUT:"; ls -la "$OUT" | tail -n +2
  [ "$(find "$OUT" -type f | wc -l)" -le 8 ] || echo "WARNING: more than 8 files in $OUT: not all come back"
  return "$FAILED"
}

main 2>&1 | tee "$OUT/log.txt"
exit "${PIPESTATUS[0]}"
