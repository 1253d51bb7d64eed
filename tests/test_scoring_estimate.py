"""The full-benchmark scoring estimate (issue 27 §4): the engine's batching replayed over compiled step costs
(prefill chunks at their fill, decode steps at their bucket, score_logit without decode), and the critic's
scoring steps compiled for a TPU slice by libtpu (tiny recipe, subprocess; skipped without libtpu)."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from jaxwrite.aot.scoring_estimate import BucketCosts, StepCost, buckets_needed, estimate_run

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cost(prefill_s: float, decode_s: float, per_block: float = 0.0) -> tuple[StepCost, StepCost]:
    # peak 1 FLOP/s: seconds = flops; no traffic floor
    return (StepCost(prefill_s, per_block, 0.0, 1.0, 512, 1, True), StepCost(decode_s, 0.0, 0.0, 1.0, 512, 1, True))


def test_estimate_replays_admissions_prefill_chunks_and_decode_steps():
    costs = {b: BucketCosts(b, *_cost(1.0 * b / 1024, 0.01 * b / 1024)) for b in (1024, 2048, 4096)}
    prompts = [100, 900, 1500, 300]      # two admissions of two rows: longest 900, then 1500
    run = estimate_run(prompts, verdict_tokens=40, costs=costs, rows=2, calls_per_query=2)
    # 900 tokens: 2 chunks into bucket pow2(1024 + 32) = 2048; 1500: 3 chunks into 2048.
    assert run.prefill_s == pytest.approx(2 * 2.0 + 3 * 2.0)
    # 40 verdict tokens run two 32-step calls in the cache the prefill made (2048 for both admissions: the
    # engine grows a cache, never shrinks it, and 1500 + 64 + 32 still fits).
    assert run.decode_s == pytest.approx(64 * 0.02 + 64 * 0.02)
    assert run.queries == 2 and run.calls == 4 and run.fits
    logit = estimate_run(prompts, 0, costs, rows=2, generate=False)
    assert logit.decode_s == 0 and logit.prefill_s == run.prefill_s
    assert set(buckets_needed(prompts, 40, 2)) <= set(costs)


def test_prefill_cost_grows_with_the_chunk_fill():
    cost = BucketCosts(4096, *_cost(1.0, 0.0, per_block=0.5))
    assert cost.prefill_s(0) < cost.prefill_s(1024) < cost.prefill_s(3072)
    # the cache pass visits the blocks filled before the chunk: none for the first, two for 1024 slots
    assert cost.prefill_s(0) == pytest.approx(1.0) and cost.prefill_s(1024) == pytest.approx(1.0 + 0.5 * 2)


@pytest.mark.skipif(importlib.util.find_spec("libtpu") is None, reason='libtpu not installed (pip install -e ".[tpu]")')
def test_tiny_critic_scoring_steps_compile_for_a_slice(tmp_path):
    script = ("import json, os\n"
              "os.environ.setdefault('ALLOW_MULTIPLE_LIBTPU_LOAD', '1'); os.environ.setdefault('TPU_SKIP_MDS_QUERY', '1')\n"
              "from jaxwrite.train import load_recipe\n"
              "from jaxwrite.aot.scoring_estimate import scoring_costs\n"
              "c = scoring_costs(load_recipe('critic_sft_tiny', ['--config.model.vocab_size=4096']), 'v5e-4',\n"
              "                  mesh=(4, 1, 1), rows=8, buckets=[4096])[4096]\n"
              "print(json.dumps({'p0': c.prefill_s(0), 'p1': c.prefill_s(2048), 'd': c.decode_s(4000),\n"
              "                  'slope': c.prefill.slope, 'fits': c.prefill.fits and c.decode.fits}))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "XLA_FLAGS")}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # The cache pass loops over the filled key blocks, so a later chunk's FLOPs grow with the blocks it visits.
    assert out["fits"] and out["slope"] > 0 and 0 < out["p0"] <= out["p1"] and out["d"] > 0
