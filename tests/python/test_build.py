"""Building from source without the system libraries stops at configure with one message that
names every missing library and the apt line that installs them (not a CMake trace each)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEBIAN = ["liburing-dev", "libzstd-dev", "libblosc-dev", "liblz4-dev", "libdeflate-dev", "zlib1g-dev", "libbz2-dev",
          "liblzma-dev", "libflatbuffers-dev", "flatbuffers-compiler", "nlohmann-json3-dev", "libssl-dev",
          "libcurl4-openssl-dev"]


def _cmake() -> str:
    """The cmake the build uses: scripts/setup.sh installs it into the venv, beside python."""
    import sys

    found = shutil.which("cmake") or shutil.which("cmake", path=os.path.dirname(sys.executable))
    assert found, "cmake is neither on PATH nor in the venv: run scripts/setup.sh (it installs cmake)"
    return found


def test_configure_without_the_libraries_names_each_and_the_apt_line(tmp_path):
    cmake = _cmake()
    env = dict(os.environ, PKG_CONFIG_LIBDIR=str(tmp_path / "no-pc-files"))  # pkg-config finds nothing
    hide = ["ZLIB", "BZip2", "nlohmann_json", "OpenSSL", "CURL"]  # and CMake's own finders find nothing
    r = subprocess.run([cmake, "-S", str(ROOT), "-B", str(tmp_path / "build"), "-DLSIO_BUILD_PYTHON=OFF",
                        f"-DLSIO_FLATC={tmp_path / 'no-flatc'}",  # and no flatc
                        *(f"-DCMAKE_DISABLE_FIND_PACKAGE_{p}=ON" for p in hide)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode != 0
    err = r.stderr
    assert err.count("CMake Error") == 1, err  # one message, not one per library
    flat = " ".join(err.split())  # CMake wraps long lines
    assert "these system libraries (with their headers) are missing" in flat
    for module, debian in zip(("liburing", "libzstd", "blosc", "liblz4", "libdeflate", "zlib", "libbz2",
                               "liblzma", "flatbuffers", "flatc", "nlohmann_json >= 3.9", "OpenSSL libcrypto",
                               "libcurl"), DEBIAN,
                              strict=True):
        assert f"{module} (Debian/Ubuntu: {debian})" in flat, module
    assert "sudo apt-get install " + " ".join(DEBIAN) in flat, flat


def test_sdist_builds_and_configures(tmp_path):
    # The sdist holds what a build needs (and none of the local build trees or stores): it is
    # made by the package's own backend, unpacked, and configured by CMake from there.
    cmake = _cmake()
    import sys
    import tarfile

    pytest.importorskip("build", reason="the test extra installs 'build'")
    r = subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o", str(tmp_path), str(ROOT)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (sdist,) = tmp_path.glob("lsio-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
        top = names[0].split("/")[0]
        for needed in ("pyproject.toml", "CMakeLists.txt", "python/lsio/__init__.py", "cpp/src/read/executor.cc",
                       "cpp/bindings/module.cc", "README.md"):
            assert f"{top}/{needed}" in names, needed
        for never in ("/build/", "/.venv/", "/dist/", "/benchmarks/.cache/"):
            assert not [n for n in names if never in n + "/"], never
        tar.extractall(tmp_path / "src")
    r = subprocess.run([cmake, "-S", str(tmp_path / "src" / top), "-B", str(tmp_path / "b"), "-DLSIO_BUILD_PYTHON=OFF"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
