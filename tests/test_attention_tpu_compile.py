"""Each attention implementation lowers and compiles through the real TPU compiler (Mosaic for splash)
for a v5p topology, and the blockwise causal pass costs what a causal model counts.

TPU compiles run benchmarks/attention_compile.py in a subprocess: the test process is pinned to CPU
(conftest sets JAX_PLATFORMS=cpu) and libtpu only provides compile-only TPU devices to a process that
does not. Without libtpu (`pip install "jax[tpu]"`) those tests skip; the FLOPs accounting itself is
also checked on the CPU compiler, which always runs.
"""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "attention_compile.py"
needs_libtpu = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                                  reason="libtpu not installed (pip install -e \".[tpu]\")")


def _run(tmp_path, *args, tpu: bool) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    env.pop("XLA_FLAGS", None)
    if tpu:
        env.pop("JAX_PLATFORMS", None)
        env["ALLOW_MULTIPLE_LIBTPU_LOAD"] = "1"   # a second process may hold libtpu's lock file
    else:
        env["JAX_PLATFORMS"] = "cpu"
    out = tmp_path / "rows.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), *args, "--json", str(out)], env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(out.read_text())
    errors = [r for r in rows if "error" in r]
    assert not errors, errors
    return rows


def _ratio(rows, impl, mode):
    (row,) = [r for r in rows if r["impl"] == impl and r["mode"] == mode]
    return row["compiled_flops"] / row["causal_flops"]


def _check_causal_flops(rows, blocks: int):
    # Lower-triangular pairs: (n + 1) / n of the causal forward (the diagonal blocks are computed
    # whole); training adds the backward's score recomputation, 7 matmuls per pair against the 6
    # a model counts (2 forward + 4 backward).
    tri = (blocks + 1) / blocks
    assert tri <= _ratio(rows, "blockwise", "forward") <= tri * 1.05
    assert tri * 7 / 6 <= _ratio(rows, "blockwise", "train") <= tri * 7 / 6 * 1.05
    # ... where the reference, by 8 query blocks, computes 9/16 of the full square: (9/8) x causal.
    assert _ratio(rows, "reference", "forward") == pytest.approx(9 / 8, rel=0.05)


def test_blockwise_causal_flops_on_the_cpu_compiler(tmp_path):
    """1,024 tokens in 128-token blocks: 36 pairs, accounted from the compiled loop body."""
    rows = _run(tmp_path, "--topology", "cpu", "--seqs", "1024", "--block", "128", "--dtype", "float32",
                "--impls", "reference,blockwise", "--modes", "forward,train", tpu=False)
    assert [r["loop_trips"] for r in rows if r["impl"] == "blockwise"] == [36, 36]
    _check_causal_flops(rows, 8)


@needs_libtpu
@pytest.mark.timeout(1800)   # ~1 min on an idle 2-core machine; compiles slow down a lot under load
def test_every_implementation_compiles_for_v5p(tmp_path):
    """reference, blockwise and splash (Mosaic), forward + backward, and the decode step (the one cache
    pass every implementation runs, measured once), at 2,048 tokens in 256-token blocks for v5p:
    blockwise costs the causal FLOPs and, like splash, needs less than half the reference's temporary
    HBM; the decode step's temporaries stay far below the cache it reads (no copy of it)."""
    rows = _run(tmp_path, "--topology", "v5p:2x2x1", "--seqs", "2048", "--block", "256",
                "--modes", "train,decode", tpu=True)
    assert {(r["impl"], r["mode"]) for r in rows} == {
        ("reference", "train"), ("blockwise", "train"), ("splash", "train"),
        ("blockwise", "decode")}
    tri = 9 / 8                                  # 8 blocks: 36 of 64 pairs
    assert tri * 7 / 6 <= _ratio(rows, "blockwise", "train") <= tri * 7 / 6 * 1.05
    temp = {(r["impl"], r["mode"]): r["temp_bytes"] for r in rows}
    assert temp["blockwise", "train"] < temp["reference", "train"] / 2
    assert temp["splash", "train"] < temp["reference", "train"] / 2
    (decode,) = [r for r in rows if r["mode"] == "decode"]
    assert decode["temp_bytes"] < decode["argument_bytes"] / 4


_MODEL_STEP = """
import sys
import jax, jax.numpy as jnp, numpy as np
from flax import nnx
from jax.experimental import topologies
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jaxwrite.models import Transformer, get_preset
from jaxwrite.parallel import MESH_AXES, state_shardings, use_mesh_rules

impl = sys.argv[1]
cfg = get_preset("tiny", vocab_size=1024).replace(d_model=256, num_heads=4, num_kv_heads=2, head_dim=128,
                                                  d_ff=512, dtype="bfloat16", remat="full", attention=impl)
devs = topologies.get_topology_desc(topology_name="v5p:2x2x1", platform="tpu").devices
mesh = Mesh(np.asarray(devs).reshape(1, 4, 1), MESH_AXES)
graphdef, state = nnx.split(nnx.eval_shape(lambda: Transformer(cfg, nnx.Rngs(0))))
shard = state_shardings(state, mesh)
state = jax.tree.map(lambda v, s: v.replace(jax.ShapeDtypeStruct(v.get_value().shape, v.get_value().dtype, sharding=s)),
                     state, shard, is_leaf=lambda x: isinstance(x, nnx.Variable))
rows = NamedSharding(mesh, P(("data", "fsdp")))
tokens = jax.ShapeDtypeStruct((4, 2048), jnp.int32, sharding=rows)

def step(state, tokens, seg):
    def loss(state):
        logits = nnx.merge(graphdef, state)(tokens, segment_ids=seg).logits
        return jnp.mean(jax.nn.log_softmax(logits)[..., 0])
    return jax.grad(loss)(state)

with use_mesh_rules(mesh):
    compiled = jax.jit(step).lower(state, tokens, tokens).compile()
hlo = compiled.as_text()
print("MOSAIC" if "tpu_custom_call" in hlo else "NO-MOSAIC", compiled.memory_analysis().temp_size_in_bytes)
"""


@needs_libtpu
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("impl", ["splash", "blockwise"])
def test_model_train_step_with_long_context_attention_compiles_for_v5p(impl):
    """A 2-layer model (head_dim 128, GQA, packed rows of 2,048 tokens, full remat, FSDP over 4 v5p
    chips): its gradient step compiles with model.attention=splash (a Mosaic kernel in the layer scan,
    inside shard_map) and =blockwise."""
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               ALLOW_MULTIPLE_LIBTPU_LOAD="1")
    env.pop("JAX_PLATFORMS", None)
    env.pop("XLA_FLAGS", None)
    proc = subprocess.run([sys.executable, "-c", _MODEL_STEP, impl], env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    marker, temp = proc.stdout.split()[-2:]
    assert marker == ("MOSAIC" if impl == "splash" else "NO-MOSAIC") and int(temp) > 0
