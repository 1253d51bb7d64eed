"""libtpu stays quiet on a machine without a TPU (issue 29): JAX initialises every backend it knows, so
with libtpu installed (the tpu extra) a plain `import jax; jax.devices()` prints libtpu's preamble
(`could not determine TPU accelerator type`, `TPU_WORKER_HOSTNAMES`); the jaxwrite commands that start
JAX do not, unless a TPU is present or a compile was asked for. The test runs where the preamble shows
(libtpu installed, no TPU), which the control checks first."""
import importlib.util
import os
import subprocess
import sys

import pytest

from jaxwrite.common.platform import tpu_attached

NOISE = ("could not determine TPU", "TPU_WORKER_HOSTNAMES")


def _env():
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "XLA_FLAGS")}
    env["PYTHONPATH"] = os.getcwd()
    return env


@pytest.mark.skipif(importlib.util.find_spec("libtpu") is None or tpu_attached(),
                    reason="needs libtpu installed on a machine without a TPU")
def test_commands_keep_libtpu_quiet_without_a_tpu(tmp_path):
    control = subprocess.run([sys.executable, "-c", "import jax; jax.devices()"], env=_env(), capture_output=True,
                             text=True, timeout=300)
    if not any(n in control.stderr for n in NOISE):
        pytest.skip("this libtpu prints no preamble here")
    from jaxwrite.models import save_hf
    from test_infer_support import model, tokenizer_dir
    save_hf(model(), str(tmp_path / "hf"), tokenizer_dir=tokenizer_dir())
    run = subprocess.run([sys.executable, "-m", "jaxwrite", "convert", str(tmp_path / "hf"), str(tmp_path / "dst")],
                         env=_env(), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert not any(n in run.stderr for n in NOISE), run.stderr[-2000:]


def test_building_the_cli_starts_no_jax():
    """quiet_libtpu must run before JAX is imported, and it runs after the parser is built: so building the
    parser (every subcommand's register) imports no JAX. Runs everywhere, libtpu or not."""
    code = ("import sys; from jaxwrite.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('jax', 'jaxlib', 'flax', 'optax') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "[]"
