"""`jaxwrite compile`: recipes compiled for TPU slices through libtpu's compile-only devices (no TPU).

The compiles run in a subprocess: this test process is pinned to 8 simulated CPU devices
(conftest.py), while a TPU compile needs JAX to see the TPU plugin. Skipped when libtpu is absent
(`pip install -e ".[tpu]"`; CI installs it)."""
import functools
import importlib.util
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
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
        # Every kernel and loop of these steps is counted, so the roofline gives a real estimate; a step
        # with uncounted FLOPs would report null here (test_uncounted_flops_give_no_mfu_estimate).
        assert step["flops_complete"] is True, step
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
    # 4 prompts, so the prefill's rows split over the 4 chips: 2 rows would be computed twice over (a
    # real waste the FLOPs ratio shows, 8x here, since the prefill's model FLOPs have no LM head).
    proc, report = _compile(tmp_path, "--config", "configs/grpo_tiny.py", "--topology", "v5e-4",
                            "--config.model.vocab_size=4096", "--config.rl.prompts_per_step=4",
                            "--config.rl.group_size=4", "--config.rl.engine_max_batch=16")
    assert proc.returncode == 0, proc.stderr[-2000:]
    steps = _check_fits(report, ["train_step", "rollout_prefill", "rollout_decode"])
    # One decode step's bytes per chip beside the ideal at three cache fills: the attention reads more
    # as the fill grows, by what the filled slots hold (a copy of the cache per step would double the
    # growth). The tiny model's ideal is ~1.4 MB, so the fixed per-step work (top-p over the
    # vocabulary's logits) weighs: its ratio is ~2.6-4.2, where the 7B and 32B recipes run at 0.98-1.20
    # (docs/TPU.md).
    rows = steps["rollout_decode"]["step_bytes"]
    assert [r["fill"] for r in rows] == sorted(r["fill"] for r in rows) and len(rows) == 3
    assert rows[0]["compiled_bytes"] < rows[-1]["compiled_bytes"]
    growth = (rows[-1]["compiled_bytes"] - rows[0]["compiled_bytes"]) / (rows[-1]["ideal_bytes"] - rows[0]["ideal_bytes"])
    assert 0.4 < growth < 1.5 and all(r["ratio"] < 6 for r in rows), rows
    assert "bytes per decode step at fill" in proc.stdout


@needs_libtpu
def test_lora_fits_the_7b_critic_on_one_32gib_chip_where_full_fine_tuning_does_not(tmp_path):
    # The paper's 16k-token rows, one row per microbatch. LoRA: a frozen bf16 base (~14 GiB) plus 40M
    # adapter parameters; full: float32 Adam moments and gradients for all 7.6B parameters (~77 GiB).
    args = ["--config", "configs/critic_sft_qwen2.5_7b.py:gpu", "--topology", "v6e-1", "--step", "train_step"]
    proc, report = _compile(tmp_path, *args, "--config.model.lora.rank=16")
    assert proc.returncode == 0, proc.stderr[-2000:]
    [step] = report["steps"]    # (its splash kernels' FLOPs are not counted, so no roofline check here)
    assert step["fits"] is True and step["hbm_bytes_per_device"] < step["hbm_capacity_bytes"], step
    assert step["argument_bytes"] < 16 * 2**30          # the base in bf16 and the adapters' state only
    proc, report = _compile(tmp_path, *args)
    assert proc.returncode == 1 and report["steps"][0]["fits"] is False, proc.stderr[-2000:]


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


@needs_libtpu
def test_pallas_log_prob_kernel_fits_v4_vmem(tmp_path):
    """v4 has 16 MiB of VMEM (v5p / v6e more): at Qwen2.5-7B's hidden 3,584 the blocks sized for 32 MiB
    needed 18.6 MB and Mosaic refused the writer SFT step for v4-32. The kernels size their blocks and
    scoped VMEM for the chip they are compiled for."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "XLA_FLAGS")}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    out = tmp_path / "memory.json"
    proc = subprocess.run([sys.executable, "benchmarks/logprob_memory.py", "--topology", "v4:1x1x1",
                           "--sizes", "512,3584,16384", "--json", str(out)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert {row["impl"] for row in json.loads(out.read_text())["rows"]} == {"reference", "chunked", "pallas"}


def test_pallas_log_prob_blocks_follow_the_chips_vmem(monkeypatch):
    from jaxwrite.kernels import _logprob_pallas_tpu as tpu
    for kind, limit in (("TPU v4", 16 * 2 ** 20), ("TPU v5", 32 * 2 ** 20), ("TPU v6 lite", 32 * 2 ** 20)):
        monkeypatch.setattr(tpu, "_device_kind", lambda kind=kind: kind)
        assert tpu.vmem_limit_bytes() == limit
        for d in (2048, 3584, 4096, 5120):   # the LM heads of the shipped recipes
            bt, bv = tpu.default_blocks(d, 2)
            assert tpu.vmem_bytes(bt, bv, d, 2) <= limit * 3 // 4, (kind, d, bt, bv)


def test_hlo_flops_counts_loop_bodies_by_their_trip_count():
    """Three loops as XLA's TPU pipeline writes them (no known_trip_count): a scan (i < 6 from 0 by 1),
    a windowed all-gather matmul (u32 counter from a copied 0 by 2 while i < 8: 4 trips) and a loop
    whose bound is computed at run time (counted once and reported); plus a batched dot written as a
    TPU-style convolution over a dilated window (only one real tap per output)."""
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
  %one = s32[] constant(1)
  %next = s32[] add(%j, %one)
  ROOT %t = (s32[], f32[4,8]) tuple(%next, %d)
}

%wcond (wp: (f32[4,8], u32[])) -> pred[] {
  %eight = u32[]{:T(128)} constant(8)
  %wp = (f32[4,8], u32[]) parameter(0)
  %wi = u32[]{:T(128)} get-tuple-element(%wp), index=1
  ROOT %wlt = pred[] compare(%eight, %wi), direction=GT
}

%wbody (wq: (f32[4,8], u32[])) -> (f32[4,8], u32[]) {
  %wq = (f32[4,8], u32[]) parameter(0)
  %wx = f32[4,8]{1,0} get-tuple-element(%wq), index=0
  %ww = f32[8,8]{1,0} constant({...})
  %wd = f32[4,8]{1,0} dot(f32[4,8]{1,0} %wx, f32[8,8]{1,0} %ww), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %wj = u32[] get-tuple-element(%wq), index=1
  %wc = u32[]{:T(128)S(6)} copy(%wj)
  %two = u32[] constant(2)
  %wnext = u32[] add(%wc, %two)
  ROOT %wt = (f32[4,8], u32[]) tuple(%wd, %wnext)
}

%dcond (dp: (s32[], f32[4,8], s32[])) -> pred[] {
  %dp = (s32[], f32[4,8], s32[]) parameter(0)
  %di = s32[] get-tuple-element(%dp), index=0
  %dn = s32[] get-tuple-element(%dp), index=2
  ROOT %dlt = pred[] compare(%di, %dn), direction=LT
}

%dbody (dq: (s32[], f32[4,8], s32[])) -> (s32[], f32[4,8], s32[]) {
  %dq = (s32[], f32[4,8], s32[]) parameter(0)
  %dx = f32[4,8]{1,0} get-tuple-element(%dq), index=1
  %dw = f32[8,8]{1,0} constant({...})
  %dd = f32[4,8]{1,0} dot(f32[4,8]{1,0} %dx, f32[8,8]{1,0} %dw), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %dj = s32[] get-tuple-element(%dq), index=0
  %dn2 = s32[] get-tuple-element(%dq), index=2
  %done = s32[] constant(1)
  %dnext = s32[] add(%dj, %done)
  ROOT %dt = (s32[], f32[4,8], s32[]) tuple(%dnext, %dd, %dn2)
}

ENTRY %main (a: f32[4,8], l: bf16[2,256,16], r: bf16[2,16,64], n: s32[]) -> f32[4,8] {
  %a = f32[4,8]{1,0} parameter(0)
  %l = bf16[2,256,16]{2,1,0} parameter(1)
  %r = bf16[2,16,64]{2,1,0} parameter(2)
  %n = s32[] parameter(3)
  %conv = bf16[2,256,64]{2,1,0} convolution(%l, %r), window={size=2 lhs_dilate=2}, dim_labels=0bf_0io->0bf
  %z = s32[] constant(0)
  %init = (s32[], f32[4,8]) tuple(%z, %a)
  %loop = (s32[], f32[4,8]) while(%init), condition=%cond, body=%body
  %y = f32[4,8] get-tuple-element(%loop), index=1
  %uz = u32[] constant(0)
  %uzc = u32[]{:T(128)} copy(%uz)
  %winit = (f32[4,8], u32[]) tuple(%y, %uzc)
  %wloop = (f32[4,8], u32[]) while(%winit), condition=%wcond, body=%wbody
  %wy = f32[4,8] get-tuple-element(%wloop), index=0
  %dinit = (s32[], f32[4,8], s32[]) tuple(%z, %wy, %n)
  %dloop = (s32[], f32[4,8], s32[]) while(%dinit), condition=%dcond, body=%dbody
  ROOT %out = f32[4,8] get-tuple-element(%dloop), index=1
}
"""
    counted = hlo_flops(text)
    assert counted.unknown_loops == 1 and counted.custom_calls == 0   # the run-time bound
    # (6 + 4 + 1) trips x 2·4·8·8, plus the batched matmul 2 · 2·256·64 · 16 (one real tap of the window).
    assert counted.flops == (6 + 4 + 1) * 2 * 4 * 8 * 8 + 2 * 2 * 256 * 64 * 16
    # The same bound as a constant carried in the loop tuple (a hoisted invariant) is static: 7 trips.
    hoisted = text.replace("tuple(%z, %wy, %n)", "tuple(%z, %wy, %seven)").replace(
        "  %n = s32[] parameter(3)\n", "  %n = s32[] parameter(3)\n  %seven = s32[] constant(7)\n")
    counted = hlo_flops(hoisted)
    assert counted.unknown_loops == 0 and counted.flops == (6 + 4 + 7) * 2 * 4 * 8 * 8 + 2 * 2 * 256 * 64 * 16


SPLASH_CALL = """  %splash_mha_{phase}_segmented_no_residuals.1 = ({outputs}) \
custom-call(%a, %b, %q, %k, %v), custom_call_target="tpu_custom_call", \
operand_layout_constraints={{s8[1,8,8]{{2,1,0}}, s8[1,8,8]{{2,1,0}}, \
bf16[2,40,2048,128]{{3,2,1,0}}, bf16[2,8,2048,128]{{3,2,1,0}}, bf16[2,8,2048,128]{{3,2,1,0}}, s32[2048,128]{{1,0}}}}, \
frontend_attributes={{kernel_metadata={{
"xprof_metadata":"{{\\"block_q{sfx}\\": 256, \\"block_kv{sfx}\\": {bk}, \\"q_layout\\": 1, \\"k_layout\\": 1}}"
}}}}, metadata={{op_name="jit(f)/{scope}/vmap(static_sparsity_splash)/pallas_call"}}, \
backend_config={{"custom_call_config":{{"body":"TUzv"}}}}
"""


@pytest.mark.parametrize("phase, outputs, matmuls", [("fwd", 1, 2), ("dq", 2, 3), ("dkv", 4, 4), ("dkv", 6, 5)])
def test_splash_kernel_flops_count_only_the_causal_blocks(phase, outputs, matmuls):
    """A splash call (its attributes span lines, as Pallas prints them): batch 2 x 40 heads x 2,048
    tokens x head_dim 128 in 256 x 256 blocks (8 x 8, 36 on or below the diagonal), or 256 x 512 blocks
    (query block i sees key blocks up to (i + 1) * 256 - 1: 1+1+2+2+3+3+4+4 = 20 of 32). A dkv call
    with dq fused in (6 outputs) runs one more matmul per pair."""
    from jaxwrite.aot import hlo_flops
    from jaxwrite.models.attention_kernels import SPLASH_CAUSAL_SCOPE
    sfx = "" if phase == "fwd" else "_" + phase
    shapes = ", ".join(["f32[256,128]{1,0}"] * (outputs - 1) + ["bf16[2,40,2048,128]{3,2,1,0}"])
    for bk, pairs in ((256, 36), (512, 20)):
        call = SPLASH_CALL.format(phase=phase, sfx=sfx, bk=bk, scope=SPLASH_CAUSAL_SCOPE, outputs=shapes)
        text = f"HloModule m\n\nENTRY %main (q: bf16[2,40,2048,128]) -> bf16[40,2048,128] {{\n{call}}}\n"
        counted = hlo_flops(text)
        assert counted.custom_calls == 0
        assert counted.flops == 2 * 40 * pairs * matmuls * 2 * 256 * bk * 128
    # Without jaxwrite's causal mark the mask is unknown: the call is reported, not guessed.
    call = SPLASH_CALL.format(phase=phase, sfx=sfx, bk=256, scope="some_other_mask", outputs="bf16[2]{0}")
    counted = hlo_flops(f"HloModule m\n\nENTRY %main (q: bf16[2]) -> bf16[2] {{\n{call}}}\n")
    assert counted.custom_calls == 1 and counted.flops == 0


@needs_libtpu
def test_splash_attention_compiled_flops_are_the_causal_flops(tmp_path):
    """Splash compiled for v5p by Mosaic, 2,048 tokens in 256-token blocks (36 of 64 block pairs
    visible): the forward costs the causal model FLOPs plus the diagonal blocks (9/8); training adds
    the backward kernels' recomputation, 9 matmuls per pair (forward 2, dq 3, dkv 4) against the 6 a
    model counts. Counting every block would give 2x these."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "XLA_FLAGS")}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env["ALLOW_MULTIPLE_LIBTPU_LOAD"] = "1"
    out = tmp_path / "rows.json"
    proc = subprocess.run([sys.executable, "benchmarks/attention_compile.py", "--topology", "v5p:2x2x1",
                           "--seqs", "2048", "--block", "256", "--impls", "splash", "--modes", "forward,train",
                           "--json", str(out)], cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    ratio = {r["mode"]: r["compiled_flops"] / r["causal_flops"] for r in json.loads(out.read_text())}
    assert ratio["forward"] == pytest.approx(9 / 8, rel=1e-3)
    assert ratio["train"] == pytest.approx(9 / 8 * 9 / 6, rel=1e-3)


def _block_loop(big, update, read_first: bool, block: int = 512, trips: int = 8):
    """A loop writing one block of `big` in place per trip and reading another (or, read_first, the
    block it is about to overwrite, which forces XLA to keep the old buffer: a copy each trip)."""
    def body(i, carry):
        acc, big = carry
        if read_first:
            part = jax.lax.dynamic_slice_in_dim(big, i * block, block)
        big = jax.lax.dynamic_update_slice_in_dim(big, update * i.astype(jnp.float32), i * block, axis=0)
        if not read_first:
            part = jax.lax.dynamic_slice_in_dim(big, (trips - 1 - i) * block, block)
        return acc + (part * part).sum(), big
    return jax.lax.fori_loop(0, trips, body, (jnp.float32(0), big))


def test_hlo_bytes_counts_slices_in_place_updates_and_copies():
    """Bytes of a compiled loop (CPU): a trip that slices one 128 KiB block and updates another in place
    moves a few blocks, not the 2 MiB array; one that reads the block it overwrites makes XLA copy the
    array every trip, and the count shows at least a read and a write of it per trip."""
    from jaxwrite.aot.hlo_bytes import hlo_bytes
    big = jax.ShapeDtypeStruct((8192, 64), jnp.float32)
    block = jax.ShapeDtypeStruct((512, 64), jnp.float32)
    counted = {}
    for read_first in (False, True):
        fn = jax.jit(functools.partial(_block_loop, read_first=read_first), donate_argnums=(0,))
        counted[read_first] = hlo_bytes(fn.lower(big, block).compile().as_text()) / 8   # per trip
    block_bytes, big_bytes = 512 * 64 * 4, 8192 * 64 * 4
    assert 2 * block_bytes <= counted[False] <= 6 * block_bytes
    assert counted[True] >= 2 * big_bytes


def test_uncounted_flops_give_no_mfu_estimate():
    """A step whose kernels or loops are not all counted has compiled FLOPs that are only a lower bound:
    no step time and no MFU (null in --json, n/a in the text), never the 100 % a max() would make."""
    import types
    from jaxwrite.aot.report import describe, from_compiled
    from jaxwrite.parallel.chips import CHIPS
    mem = types.SimpleNamespace(argument_size_in_bytes=2 ** 30, output_size_in_bytes=2 ** 30,
                                temp_size_in_bytes=2 ** 30, alias_size_in_bytes=2 ** 30)
    compiled = types.SimpleNamespace(memory_analysis=lambda: mem)
    chip = CHIPS["v5p"]
    counted = from_compiled("train_step", compiled, chip, 1e12, 4e14, 1, 1.0, "notes", complete=False)
    report = counted.as_json()
    assert {"name", "fits", "hbm_bytes_per_device", "hbm_capacity_bytes", "compiled_flops", "model_flops",
            "estimated_mfu"} <= set(report)
    assert report["estimated_mfu"] is None and report["estimated_step_s"] is None
    assert report["flops_complete"] is False and json.loads(json.dumps(report))["estimated_mfu"] is None
    assert "n/a" in describe(counted) and "≥" in describe(counted)
    full = from_compiled("train_step", compiled, chip, 5e14, 4e14, 1, 1.0, "notes").as_json()
    assert full["estimated_mfu"] == pytest.approx(0.8)   # compute-bound: model / compiled FLOPs
