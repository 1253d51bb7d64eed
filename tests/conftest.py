"""Test setup: 8 simulated CPU devices for sharding tests, shared data root."""
import os
import pathlib

# Must be set before jax is imported anywhere in the test process.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import pytest  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def data_dir() -> pathlib.Path:
    """The shared data root (`../shared/data`), or JAXWRITE_DATA_DIR when set."""
    root = pathlib.Path(os.environ.get("JAXWRITE_DATA_DIR", SHARED_DATA))
    if not (root / "writingbench").exists():
        pytest.skip(f"shared data not found at {root}")
    return root
