#!/usr/bin/env bash
# Build the documentation site (Sphinx + MyST, Furo theme) into build/docs/html, with every
# Sphinx warning an error. Offline once the requirements are installed: no intersphinx, no
# remote images.
#
#   bash scripts/docs.sh            # from anywhere; uses the active venv (else .venv/, else python3)
#   bash scripts/docs.sh -E         # extra arguments go to sphinx (-E: rebuild from scratch)
#
# Steps:
#   1. pip-installs docs/requirements.txt into that environment, only if a requirement is
#      missing or too old (so an up-to-date environment needs no network);
#   2. checks that lsio itself is importable there (the API reference is generated from the
#      installed package's docstrings; install it with `pip install .` first);
#   3. python -m sphinx -W --keep-going -b html docs build/docs/html
# Exit status: non-zero when any step fails, including any Sphinx warning.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if [[ -n "${VIRTUAL_ENV:-}" ]]; then
    PY="$VIRTUAL_ENV/bin/python"
elif [[ -x "$ROOT/.venv/bin/python" ]]; then
    PY="$ROOT/.venv/bin/python"
else
    PY="$(command -v python3)"
fi
REQS="docs/requirements.txt"

# 1. Requirements: installed only when missing (checked against the specifiers in REQS).
if ! "$PY" - "$REQS" <<'PYEOF'
import sys
from importlib import metadata
try:
    from packaging.requirements import Requirement
except ImportError:  # pip vendors packaging
    from pip._vendor.packaging.requirements import Requirement
missing = []
for line in open(sys.argv[1]):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    req = Requirement(line)
    try:
        version = metadata.version(req.name)
    except metadata.PackageNotFoundError:
        missing.append(f"{req} (not installed)")
        continue
    if not req.specifier.contains(version, prereleases=True):
        missing.append(f"{req} (have {version})")
if missing:
    print("docs: missing requirements: " + ", ".join(missing), file=sys.stderr)
    sys.exit(1)
PYEOF
then
    echo "docs: $PY -m pip install -r $REQS" >&2
    "$PY" -m pip install -r "$REQS"
fi

# 2. lsio must be importable: autodoc imports the installed package.
if ! "$PY" -c "import lsio" 2>/dev/null; then
    echo "docs: 'import lsio' fails with $PY; install lsio first (pip install .), see README.md" >&2
    exit 1
fi

# 3. Build; -W makes every warning an error, --keep-going reports all of them first.
echo "docs: $PY -m sphinx -W --keep-going -b html docs build/docs/html $*" >&2
"$PY" -m sphinx -W --keep-going -b html docs build/docs/html "$@"
echo "docs: open build/docs/html/index.html" >&2
