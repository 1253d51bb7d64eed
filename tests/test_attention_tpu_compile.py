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
def test_every_implementation_compiles_for_v5p(tmp_path):
    """reference, blockwise and splash (Mosaic), forward + backward and the decode step, at 4,096
    tokens for v5p: blockwise costs the causal FLOPs and needs less temporary HBM than reference."""
    rows = _run(tmp_path, "--topology", "v5p:2x2x1", "--seqs", "4096", "--modes", "train,forward,decode",
                tpu=True)
    assert {(r["impl"], r["mode"]) for r in rows} == {
        (i, m) for i in ("reference", "blockwise", "splash") for m in ("train", "forward")} | {
        ("reference", "decode"), ("blockwise", "decode")}
    _check_causal_flops(rows, 8)
    temp = {(r["impl"], r["mode"]): r["temp_bytes"] for r in rows}
    assert temp["blockwise", "train"] < temp["reference", "train"] / 2
    assert temp["splash", "train"] < temp["reference", "train"] / 2
