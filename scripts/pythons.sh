# Sourced by scripts/build_wheel.sh, scripts/wheel_smoke.sh and scripts/test.sh: find a CPython X.Y interpreter.
#
#   lsio_find_cpython 3.12   # prints the interpreter's path, or nothing (status 1) if none runs
#
# Looks, in this order, in pyenv's versions ($PYENV_ROOT/versions/3.12.*, default PYENV_ROOT
# ~/.pyenv; the newest patch release), then for python3.12 on PATH. Each candidate must run and
# report 3.12: a pyenv shim for a version that is not selected, or a broken install, is passed
# over. LSIO_PYTHON_3_12=/path/to/python (dots as underscores) names one explicitly.

# Versions of CPython lsio builds wheels for (requires-python = ">=3.10" in pyproject.toml).
LSIO_CPYTHON_VERSIONS=(3.10 3.11 3.12 3.13)

lsio_python_is() {  # lsio_python_is PATH X.Y: PATH runs and is CPython X.Y
  [ -x "$1" ] || return 1
  "$1" -c "import sys, platform; sys.exit(not (platform.python_implementation() == 'CPython' and '%d.%d' % sys.version_info[:2] == '$2'))" \
    >/dev/null 2>&1
}

lsio_find_cpython() {
  local want="$1" var cand
  var="LSIO_PYTHON_${want//./_}"
  if [ -n "${!var:-}" ]; then
    if lsio_python_is "${!var}" "$want"; then printf '%s\n' "${!var}"; return 0; fi
    printf 'warning: %s=%s is not a working CPython %s\n' "$var" "${!var}" "$want" >&2
    return 1
  fi
  local root="${PYENV_ROOT:-$HOME/.pyenv}"
  if [ -d "$root/versions" ]; then
    # Newest patch release first (3.12.10 before 3.12.9); only plain CPython version directories.
    while IFS= read -r cand; do
      if lsio_python_is "$cand/bin/python$want" "$want"; then printf '%s\n' "$cand/bin/python$want"; return 0; fi
    done < <(find "$root/versions" -mindepth 1 -maxdepth 1 -name "$want.*" 2>/dev/null |
             grep -E "/$want\.[0-9]+$" | sort -Vr)
  fi
  cand="$(command -v "python$want" 2>/dev/null || true)"
  if [ -n "$cand" ] && lsio_python_is "$cand" "$want"; then printf '%s\n' "$cand"; return 0; fi
  return 1
}
