"""Shared fixtures. Tests marked ``realdata`` skip cleanly when ../shared/data is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("NEURACT_SHARED", ROOT.parent / "shared"))
SHARED_DATA = SHARED / "data"
SHARED_ROBOTS = SHARED / "robots"


def pytest_configure(config):
    # Small batched ops run far slower with 2 intra-op threads on 2-core machines.
    import torch

    torch.set_num_threads(1)


def pytest_collection_modifyitems(config, items):
    if SHARED_DATA.is_dir():
        return
    skip = pytest.mark.skip(reason=f"real data not found at {SHARED_DATA}")
    for item in items:
        if "realdata" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def shared_robots() -> Path:
    if not SHARED_ROBOTS.is_dir():
        pytest.skip(f"reference robots not found at {SHARED_ROBOTS}")
    return SHARED_ROBOTS


@pytest.fixture(scope="session", autouse=True)
def _private_op_cache(tmp_path_factory):
    """Built operator libraries (neuract.neuralactuator.int8op) go to a cache of this test
    session, not the user's: built once, reused by every later build in the session."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NEURACT_CACHE_DIR", str(tmp_path_factory.mktemp("op_cache")))
        yield
