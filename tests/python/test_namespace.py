"""What ``import lsio`` puts in the package namespace: the public API and its submodules only."""

from __future__ import annotations

import types

import lsio


def test_no_future_annotations_in_the_namespace():
    # `from __future__ import annotations` binds a name in the module; it is not lsio's API.
    assert "annotations" not in dir(lsio)
    assert not hasattr(lsio, "annotations")


def test_public_names_are_the_api_or_submodules():
    assert all(hasattr(lsio, n) for n in lsio.__all__)
    stray = [n for n in dir(lsio) if not n.startswith("_") and n not in lsio.__all__
             and not isinstance(getattr(lsio, n), types.ModuleType)]
    assert stray == []
