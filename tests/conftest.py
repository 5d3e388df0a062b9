"""Shared pytest fixtures: a loopback HTTP file server and a small Imagenette-layout archive."""

from __future__ import annotations

import pytest
from httpserver import FileServer

from mptbench.fixtures import make_imagenette_archive


@pytest.fixture
def http_server(tmp_path):
    """A FileServer on 127.0.0.1 serving `tmp_path / "served"`; stopped after the test."""
    with FileServer(tmp_path / "served") as server:
        yield server


@pytest.fixture(scope="session")
def fixture_archive(tmp_path_factory) -> dict:
    """One small imagenette2-320.tgz (3 train and 1 val image per class, 40 px short side)."""
    path = tmp_path_factory.mktemp("imagenette") / "imagenette2-320.tgz"
    return make_imagenette_archive(path, train_per_class=3, val_per_class=1, short_side=40)
