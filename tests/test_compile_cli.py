"""`jaxwrite compile`: recipes compiled for TPU slices through libtpu's compile-only devices (no TPU).

The compiles run in a subprocess: this test process is pinned to 8 simulated CPU devices
(conftest.py), while a TPU compile needs JAX to see the TPU plugin. Skipped when libtpu is absent
(`pip install -e ".[tpu]"`; CI installs it)."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HAVE_LIBTPU = importlib.util.find_spec("libtpu") is not None
needs_libtpu = pytest.mark.skipif(not HAVE_LIBTPU, reason='libtpu not installed (pip install -e ".[tpu]")')


def _compile(tmp_path, *args, timeout=600):
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "XLA_FLAGS")}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "jaxwrite", "compile", *args, "--json", str(out)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=timeout)
    report = json.loads(out.read_text()) if out.exists() else None
    return proc, report


def _check_fits(report, names):
    steps = {s["name"]: s for s in report["steps"]}
    assert sorted(steps) == sorted(names)
    for step in steps.values():
        assert step["fits"] is True, step
        assert 0 < step["hbm_bytes_per_device"] < step["hbm_capacity_bytes"]
        # The model's matmuls are all there, and not many times over (loops counted by their trips).
        assert 0.5 < step["compiled_flops"] / step["model_flops"] < 3.0, step
        assert 0 < step["estimated_mfu"] <= 1.0
    return steps


@needs_libtpu
@pytest.mark.parametrize("topology", ["v5e-4", "v5p-8"])
def test_tiny_recipe_compiles_for_v5e_and_v5p(tmp_path, topology):
    proc, report = _compile(tmp_path, "--config", "configs/cpt_tiny.py", "--topology", topology,
                            "--config.model.vocab_size=4096")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert report["devices"] == 4 and report["chip"] == topology.split("-")[0]
    _check_fits(report, ["train_step"])
    assert "fits" in proc.stdout and "roofline estimate" in proc.stdout


@needs_libtpu
def test_small_model_with_microbatches_counts_every_layer_and_microbatch(tmp_path):
    # 8 layers in a scan inside a 2-microbatch scan: cost_analysis alone would see 1/16 of the matmuls.
    proc, report = _compile(tmp_path, "--config", "configs/cpt_tiny.py", "--topology", "v5p-8",
                            "--config.model.preset=small", "--config.model.vocab_size=32000",
                            "--config.grad_accum_steps=2", "--config.data.seq_len=512")
    assert proc.returncode == 0, proc.stderr[-2000:]
    step = _check_fits(report, ["train_step"])["train_step"]
    assert 0.9 < step["compiled_flops"] / step["model_flops"] < 1.6   # full remat off: fwd + bwd only


@needs_libtpu
def test_grpo_recipe_compiles_update_and_engine_steps(tmp_path):
    proc, report = _compile(tmp_path, "--config", "configs/grpo_tiny.py", "--topology", "v5e-4",
                            "--config.model.vocab_size=4096", "--config.rl.prompts_per_step=2",
                            "--config.rl.group_size=4", "--config.rl.engine_max_batch=8")
    assert proc.returncode == 0, proc.stderr[-2000:]
    _check_fits(report, ["train_step", "rollout_prefill", "rollout_decode"])


@needs_libtpu
def test_a_model_too_big_for_the_chip_is_reported_not_crashed(tmp_path):
    # Qwen2.5-7B with fp32 Adam on one 16 GiB v5e chip: ~120 GB of state alone.
    proc, report = _compile(tmp_path, "--config", "configs/cpt_tiny.py", "--topology", "v5e-1",
                            "--config.model.preset=qwen2.5-7b", "--config.model.vocab_size=152064")
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "DOES NOT FIT" in proc.stdout and "Traceback" not in proc.stderr
    step = report["steps"][0]
    assert step["fits"] is False and report["fits"] is False
    assert step["hbm_bytes_per_device"] > step["hbm_capacity_bytes"]


@pytest.mark.parametrize("args, expected", [
    (["--config", "configs/cpt_tiny.py", "--topology", "v5p-7"], "unknown topology 'v5p-7'"),
    (["--config", "configs/cpt_tiny.py", "--topology", "v9-8"], "unknown topology 'v9-8'"),
    (["--config", "configs/cpt_tiny.py"], "names no target; pass --topology"),
    (["--config", "configs/critic_sft_qwen2.5_7b.py:v4-8"], "unknown hardware target 'v4-8'"),
    (["--config", "configs/critic_sft_qwen2.5_7b.py:gpu"], "target 'gpu' is not a TPU slice"),
])
def test_bad_input_is_one_line(tmp_path, capsys, args, expected):
    from jaxwrite.cli import main
    assert main(["compile", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0] and err[0].startswith("jaxwrite compile: error:"), err


@needs_libtpu
def test_mesh_that_does_not_divide_the_slice_is_one_line(tmp_path):
    proc, _ = _compile(tmp_path, "--config", "configs/cpt_tiny.py", "--topology", "v5e-4",
                       "--config.mesh=(1,3,1)")
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()
    assert "Traceback" not in proc.stderr and "needs 3 devices, found 4" in err[-1], proc.stderr


def test_missing_libtpu_says_how_to_get_it(monkeypatch, capsys):
    import jaxwrite.aot.compile as aot_compile
    from jaxwrite.cli import main
    monkeypatch.setattr(aot_compile, "have_libtpu", lambda: False)
    assert main(["compile", "--config", "configs/cpt_tiny.py", "--topology", "v5e-4"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert 'pip install -e ".[tpu]"' in err[-1]


@needs_libtpu
def test_pallas_log_prob_kernel_needs_no_more_temporary_hbm_than_chunked(tmp_path):
    """Value + gradients compiled by the TPU compiler (Mosaic for the kernels) on one v5p chip."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "XLA_FLAGS")}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    out = tmp_path / "memory.json"
    proc = subprocess.run([sys.executable, "benchmarks/logprob_memory.py", "--sizes", "1024,1024,32768",
                           "--json", str(out)], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    temp = {row["impl"]: row["temp_bytes"] for row in json.loads(out.read_text())["rows"]}
    assert temp["pallas"] <= temp["chunked"] < temp["reference"], temp


def test_hlo_flops_counts_loop_bodies_by_their_trip_count():
    """A dot in a while body whose condition is i < 6, and a batched dot written as a TPU-style
    convolution over a dilated window (only one real tap per output)."""
    from jaxwrite.aot import hlo_flops
    text = """HloModule m

%cond (p: (s32[], f32[4,8])) -> pred[] {
  %c = s32[]{:T(128)} constant(6)
  %p = (s32[], f32[4,8]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  ROOT %lt = pred[] compare(%i, %c), direction=LT
}

%body (q: (s32[], f32[4,8])) -> (s32[], f32[4,8]) {
  %q = (s32[], f32[4,8]) parameter(0)
  %x = f32[4,8]{1,0} get-tuple-element(%q), index=1
  %w = f32[8,8]{1,0} constant({...})
  %d = f32[4,8]{1,0} dot(f32[4,8]{1,0} %x, f32[8,8]{1,0} %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %j = s32[] get-tuple-element(%q), index=0
  ROOT %t = (s32[], f32[4,8]) tuple(%j, %d)
}

ENTRY %main (a: f32[4,8], l: bf16[2,256,16], r: bf16[2,16,64]) -> f32[4,8] {
  %a = f32[4,8]{1,0} parameter(0)
  %l = bf16[2,256,16]{2,1,0} parameter(1)
  %r = bf16[2,16,64]{2,1,0} parameter(2)
  %conv = bf16[2,256,64]{2,1,0} convolution(%l, %r), window={size=2 lhs_dilate=2}, dim_labels=0bf_0io->0bf
  %z = s32[] constant(0)
  %init = (s32[], f32[4,8]) tuple(%z, %a)
  %loop = (s32[], f32[4,8]) while(%init), condition=%cond, body=%body
  ROOT %out = f32[4,8] get-tuple-element(%loop), index=1
}
"""
    counted = hlo_flops(text)
    assert counted.unknown_loops == 0 and counted.custom_calls == 0
    # 6 trips x 2·4·8·8, plus the batched matmul 2 · 2·256·64 · 16 (one real tap of the size-2 window).
    assert counted.flops == 6 * 2 * 4 * 8 * 8 + 2 * 2 * 256 * 64 * 16
