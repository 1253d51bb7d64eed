"""The GRPO step-time estimate (issue 26 §2): the engine's batching replayed over compiled step costs, the
producer's partial rounds, the schedules' composition, the length distributions, and `jaxwrite compile
--estimate` on the tiny recipe through libtpu (subprocess; skipped without libtpu)."""
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from jaxwrite.aot.grpo_estimate import (EngineCosts, GrpoCosts, Linear, RMCost, Schedule, estimate_schedule,
                                        sample_lengths, simulate_engine)
from jaxwrite.common import InputError
from jaxwrite.rl.config import RLConfig

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _engine(decode_per_row=1.0, per_block=0.0, weights=0.0, bandwidth=1e30, prefill=1.0) -> EngineCosts:
    # peak 1 FLOP/s: seconds = FLOPs. One compiled decode row; prefill of one row, 512-token chunk.
    return EngineCosts(1.0, bandwidth, 1, 16, Linear(decode_per_row, per_block), Linear(weights, 0.0), weights,
                       1, 16, Linear(prefill, 0.0), Linear(0.0, 0.0))


def test_engine_replay_admits_in_order_decodes_chunks_and_frees_rows():
    # max_batch 2: the group of two fills the batch; the single request waits for a free row.
    run = simulate_engine([(10, [9, 5]), (10, [3])], _engine(), max_batch=2, chunk_steps=4)
    # Each admission: one prefill row, one chunk of pow2(10) = 16 tokens: 16 / 512 of the 512-token chunk.
    assert run.prefill_s == pytest.approx(2 * 16 / 512)
    # Chunk 1: rows 8 and 4 left -> the second finishes; chunk 2 with the newcomer (2 left): rows 4 and 2.
    # Two chunks of 4 steps over 2 rows at 1 s per row-step.
    assert run.decode_s == pytest.approx(16.0)
    assert run.tokens == 17 and run.row_steps == 16 and run.active_row_steps == 4 + 4 + 4 + 2


def test_a_step_costs_the_weights_plus_what_its_rows_and_fill_add():
    costs = _engine(decode_per_row=2.0, per_block=1.0, weights=5.0, bandwidth=1.0)
    # Bandwidth-bound here (bytes = 5 whatever the rows); FLOPs grow with rows and key blocks.
    assert costs.decode_s(1, 10) == pytest.approx(5.0)
    assert costs.decode_s(4, 160) == pytest.approx(4 * (2.0 + 10))      # 10 blocks of 16 at 4 rows
    assert costs.decode_s(4, 161) > costs.decode_s(4, 160)


def test_a_ragged_cache_pass_reads_each_rows_own_blocks():
    costs = _engine(decode_per_row=2.0, per_block=1.0, weights=5.0, bandwidth=1e30)
    # Every row at the same fill: the same work as the engine's pass over the longest row.
    assert costs.decode_ragged_s(4, 4 * 10) == pytest.approx(costs.decode_s(4, 160))
    # A long prompt beside short ones: the engine's pass costs the long row's blocks for all four rows.
    requests = [(1024, [64]), (16, [64, 64, 64])]
    run = simulate_engine(requests, costs, max_batch=4, chunk_steps=16)
    ragged = simulate_engine(requests, costs, max_batch=4, chunk_steps=16, ragged=True)
    assert ragged.decode_s < 0.5 * run.decode_s and ragged.tokens == run.tokens


def _rl(**kw) -> RLConfig:
    base = dict(prompts_per_step=4, group_size=4, max_new_tokens=1024, engine_max_batch=16, engine_chunk_steps=16)
    return RLConfig(**(base | kw))


def _costs(update_s=50.0, rm=None, chips=8) -> GrpoCosts:
    # Weight-bound decode (one step costs 1 s at any batch): a drained batch's tail costs as much per step
    # as a full one, which is what partial rollouts and a streaming engine take away.
    return GrpoCosts(_engine(decode_per_row=0.0, weights=1.0, bandwidth=1.0), update_s, 2048, rm, chips,
                     ici_bandwidth=1e12, sync_bytes=8e9)


def _long_tail(n=4096, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.where(rng.random(n) < 0.1, 1024, 64)          # one sample in ten runs to the cap


def test_sync_step_is_rollout_plus_rm_plus_update():
    rm = RMCost(16, 2048, 0.5)
    one_long = np.array([64] * 15 + [1024])                  # each step's 16 samples: one at the cap
    est = estimate_schedule(_costs(rm=rm), _rl(), one_long, Schedule("sync"), prompt_tokens=128)
    assert est.step_s == pytest.approx(est.prefill_s + est.decode_s + est.rm_s + est.update_s)
    assert est.rm_s > 0 and est.weight_sync_s == 0 and est.rollout_chips == 8
    # The longest runs 1023 decode steps -> 64 chunks of 16 at 1 s per step.
    assert est.decode_s == pytest.approx(64 * 16) and est.truncated_share == pytest.approx(1 / 16)


def test_a_split_slice_never_beats_the_sum_under_a_roofline():
    # max(r / f, u / (1 - f)) >= r + u: a rollout mesh of its own overlaps the update but, with per-chip
    # rates fixed, gains nothing (the weight sync is added on top).
    for update_s in (10.0, 500.0, 5000.0):
        sync = estimate_schedule(_costs(update_s), _rl(), _long_tail(), Schedule("sync"), 128)
        split = estimate_schedule(_costs(update_s), _rl(), _long_tail(), Schedule("async", staleness=1), 128)
        assert split.step_s >= sync.step_s * (1 - 1e-9)
        assert 0 < split.rollout_chips < 8 and split.weight_sync_s > 0


def test_partial_rollouts_and_streaming_cut_the_tail_while_fixed_lengths_gain_nothing():
    rl, tail = _rl(), _long_tail()
    sync = estimate_schedule(_costs(), rl, tail, Schedule("sync"), 128, steps=12)
    partial = estimate_schedule(_costs(), rl, tail, Schedule("partial", partial_tokens=128), 128, steps=12)
    stream = estimate_schedule(_costs(update_s=1.0), rl, tail, Schedule("stream", 1, streaming=True), 128, steps=12)
    # The synchronous step waits for its longest sample, a few rows left (compacted, so few idle rows),
    # each step still reading every weight: its tokens per second collapse in the tail.
    assert sync.idle_row_share < 0.1
    assert partial.decode_s < 0.5 * sync.decode_s
    assert partial.rollout_tokens_per_s_per_chip > 1.5 * sync.rollout_tokens_per_s_per_chip
    assert partial.rounds >= 1 and partial.slowest_sample_s < sync.slowest_sample_s
    assert stream.decode_s < 0.5 * sync.decode_s
    # Every sample equally long: nothing to cut, partial or not (same decode work per step).
    fixed = np.full(256, 100)
    a = estimate_schedule(_costs(), rl, fixed, Schedule("sync"), 128)
    b = estimate_schedule(_costs(), rl, fixed, Schedule("partial", partial_tokens=128), 128, steps=12)
    assert b.tokens == pytest.approx(a.tokens) and b.decode_s == pytest.approx(a.decode_s, rel=0.1)


def test_rm_scoring_chunks_long_answers_and_pads_calls_to_a_power_of_two():
    rm = RMCost(rows=2, length=1024, call_s=1.0)
    # One row of 100 + 200 (bucket 512) and one of 100 + 700 (1024): one call at the longest, 1024.
    assert rm.seconds(100, [200, 700]) == pytest.approx(1.0)
    # A 2,000-token answer is split in 3 chunks of <= 924: rows of 766-767 tokens, two calls at 1024.
    assert rm.seconds(100, [2000]) == pytest.approx(2.0)
    assert rm.seconds(100, [10, 10]) == pytest.approx(128 / 1024)


def test_length_distributions_parse_and_cap_at_max_new(tmp_path):
    x = sample_lengths("lognormal:median=4000,sigma=0.7", 14000, 20000)
    assert 3700 < np.median(x) < 4300 and x.max() == 14000 and x.min() >= 1
    assert (sample_lengths("uniform:10-20", 100, 1000) >= 10).all()
    assert (sample_lengths("fixed:500", 300, 3) == 300).all()
    assert (sample_lengths("lognormal:median=4000,sigma=0.7", 14000, 50) == x[:50]).all()   # seeded
    path = tmp_path / "rollout_samples.jsonl"
    path.write_text("".join(json.dumps({"rollout": 0, "tokens": t}) + "\n" for t in (5, 50, 500)))
    assert set(sample_lengths(str(tmp_path), 100, 100)) <= {5, 50, 100}
    path.write_text('{"rollout": 0, "tokens": 5}\n{"rollout": 0}\n')
    with pytest.raises(InputError, match="rollout_samples.jsonl:2 field 'tokens'") as err:
        sample_lengths(str(path), 100, 10)
    assert "\n" not in str(err.value)
    for bad in ("lognormal:median=4000", "gamma:k=2", "uniform:10", str(tmp_path / "nope.jsonl")):
        with pytest.raises(InputError, match="--lengths"):
            sample_lengths(bad, 100, 10)


def _jaxwrite(*args):
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "XLA_FLAGS")}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "jaxwrite", "compile", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)


def test_estimate_needs_a_grpo_recipe_and_every_step():
    proc = _jaxwrite("--config", "configs/critic_sft_tiny.py", "--topology", "v5e-4", "--estimate")
    assert proc.returncode == 2 and "GRPO" in proc.stderr and len(proc.stderr.strip().splitlines()) <= 2
    proc = _jaxwrite("--config", "configs/grpo_tiny.py", "--topology", "v5e-4", "--estimate", "--step", "train_step")
    assert proc.returncode == 2 and "--step" in proc.stderr


@pytest.mark.skipif(importlib.util.find_spec("libtpu") is None, reason='libtpu not installed (pip install -e ".[tpu]")')
def test_compile_estimate_composes_the_tiny_recipes_compiled_steps(tmp_path):
    out = tmp_path / "est.json"
    proc = _jaxwrite("--config", "configs/grpo_tiny.py", "--topology", "v5e-4", "--config.model.vocab_size=4096",
                     "--config.rl.prompts_per_step=4", "--config.rl.group_size=4", "--config.rl.engine_max_batch=16",
                     "--estimate", "--rm-config", "configs/rm_tiny.py", "--lengths", "uniform:8-128", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert {s["name"] for s in report["steps"]} == {"train_step", "rollout_prefill", "rollout_decode", "rm_score"}
    rows = {r["schedule"]: r for r in report["estimate"]["schedules"]}
    assert list(rows)[0] == "sync" and any(name.startswith("partial K=") for name in rows)
    sync = rows["sync"]
    assert sync["step_s"] == pytest.approx(sync["prefill_s"] + sync["decode_s"] + sync["rm_s"] + sync["update_s"])
    assert all(sync[k] > 0 for k in ("prefill_s", "decode_s", "rm_s", "update_s", "rollout_tokens_per_s_per_chip"))
    assert rows["async s=1"]["step_s"] >= sync["step_s"] * (1 - 1e-9)
    assert "GRPO step-time ESTIMATE" in proc.stdout and "| sync |" in proc.stdout
