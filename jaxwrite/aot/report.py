"""Figures of one compiled step: HBM per device against the chip, compiled vs model FLOPs, and a roofline
estimate of step time and MFU (an estimate: no hardware ran it).

Roofline: time = max(compiled matmul FLOPs / peak FLOP/s, HBM traffic / bandwidth) per device, with
traffic = reads_per_call x arguments + outputs (decode reads the weights and cache once per step).
Communication between chips is not modelled, so the MFU is an upper bound of what the step can reach.

Decode steps also report the HBM bytes one step of the compiled program reads and writes per device
(jaxwrite.aot.hlo_bytes) beside the least it could (weights + filled KV + one new slot per row), at
several cache fills: a program that copied its cache, gathered weights it could keep, or attended past
the fill would show a ratio well above 1.
"""
from __future__ import annotations

import dataclasses
import re

from jaxwrite.parallel.chips import Chip

# XLA's out-of-memory messages, e.g. "the total memory required for HLO temporaries (229.62G) exceeds
# available HBM (95.74G)" or "Used 120.50G of 95.74G hbm".
_OOM = (re.compile(r"\(([\d.]+)([KMGT]?)\)\s*exceeds available HBM"),
        re.compile(r"Used\s+([\d.]+)([KMGT]?)\s+of\s+[\d.]+[KMGT]?\s+hbm", re.IGNORECASE))
_UNITS = {"": 1, "K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30, "T": 2 ** 40}


@dataclasses.dataclass
class StepReport:
    name: str
    fits: bool
    hbm_capacity_bytes: int
    hbm_bytes_per_device: int | None      # None: the compiler stopped before saying how much
    argument_bytes: int | None = None
    output_bytes: int | None = None
    temp_bytes: int | None = None
    alias_bytes: int | None = None
    compiled_flops: float | None = None    # per device, matmuls, loop trip counts applied
    model_flops: float = 0.0               # per device
    estimated_step_s: float | None = None  # None where compiled_flops is incomplete or it did not compile
    estimated_mfu: float | None = None
    compile_s: float = 0.0
    notes: str = ""
    error: str = ""                        # the compiler's one-line reason when it did not compile
    flops_complete: bool = True            # False: some kernel / loop is not in compiled_flops (a lower bound)
    # Decode steps: per cache fill, {"fill", "compiled_bytes", "ideal_bytes", "ratio"} of one step, per device.
    step_bytes: list[dict] | None = None

    @property
    def margin_bytes(self) -> int | None:
        if self.hbm_bytes_per_device is None:
            return None
        return self.hbm_capacity_bytes - self.hbm_bytes_per_device

    def as_json(self) -> dict:
        out = dataclasses.asdict(self)
        out["margin_bytes"] = self.margin_bytes
        return out


def oom_bytes(message: str) -> int | None:
    """Bytes the compiler said the program needs, from its out-of-memory message."""
    for pattern in _OOM:
        match = pattern.search(message)
        if match:
            return int(float(match.group(1)) * _UNITS[match.group(2)])
    return None


def from_compiled(name: str, compiled, chip: Chip, flops: float, model_flops_per_device: float,
                  reads_per_call: int, compile_s: float, notes: str, complete: bool = True) -> StepReport:
    """complete=False: some loop or kernel could not be counted, so the compiled FLOPs are only a lower
    bound of the work and no step time or MFU is estimated (both None: "n/a", never a guess)."""
    mem = compiled.memory_analysis()
    args, outs = int(mem.argument_size_in_bytes), int(mem.output_size_in_bytes)
    temp, alias = int(mem.temp_size_in_bytes), int(mem.alias_size_in_bytes)
    code = int(getattr(mem, "generated_code_size_in_bytes", 0))
    total = args + outs - alias + temp + code     # donated outputs reuse their argument's buffer
    traffic = reads_per_call * args + outs
    seconds = mfu = None
    if complete and (flops or traffic):
        seconds = max(flops / chip.peak_flops, traffic / chip.hbm_bandwidth)
        mfu = model_flops_per_device / (seconds * chip.peak_flops)
    return StepReport(name, total <= chip.hbm_bytes, chip.hbm_bytes, total, args, outs, temp, alias, flops,
                      model_flops_per_device, seconds, mfu, compile_s, notes, flops_complete=complete)


def from_error(name: str, err: Exception, chip: Chip, model_flops_per_device: float, compile_s: float,
               notes: str) -> StepReport:
    message = str(err)
    # The compiler's first lines say what ran out and where (e.g. which kernel overflowed VMEM).
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()][:3]
    line = " / ".join(lines) or type(err).__name__
    return StepReport(name, False, chip.hbm_bytes, oom_bytes(message), model_flops=model_flops_per_device,
                      compile_s=compile_s, notes=notes, error=line[:600])


def _gib(n: int | None) -> str:
    return "?" if n is None else f"{n / 2 ** 30:,.2f} GiB"


def describe(step: StepReport) -> str:
    """A few lines for the terminal."""
    verdict = "fits" if step.fits else "DOES NOT FIT"
    margin = step.margin_bytes
    lines = [f"{step.name}: {verdict} — {_gib(step.hbm_bytes_per_device)} of {_gib(step.hbm_capacity_bytes)} "
             f"per device (margin {_gib(margin)})  [{step.notes}]"]
    if step.error:
        lines.append(f"  compiler: {step.error}")
    if step.argument_bytes is not None:
        lines.append(f"  arguments {_gib(step.argument_bytes)}, outputs {_gib(step.output_bytes)} "
                     f"(aliased {_gib(step.alias_bytes)}), temporaries {_gib(step.temp_bytes)}")
    if step.compiled_flops is not None:
        ratio = step.compiled_flops / step.model_flops if step.model_flops else float("nan")
        bound = "" if step.flops_complete else "≥ "
        lines.append(f"  FLOPs per device: compiled {bound}{step.compiled_flops:.3e} vs model "
                     f"{step.model_flops:.3e} (ratio {bound}{ratio:.2f})")
    for row in step.step_bytes or ():
        lines.append(f"  bytes per decode step at fill {row['fill']:,}: compiled {_gib(row['compiled_bytes'])} vs "
                     f"ideal {_gib(row['ideal_bytes'])} (weights + filled KV + new slot): ratio {row['ratio']:.3f}")
    if step.estimated_step_s is not None:
        lines.append(f"  roofline estimate (no hardware ran this): {step.estimated_step_s * 1e3:,.1f} ms per "
                     f"call, MFU ≈ {100 * step.estimated_mfu:.1f} %")
    elif step.compiled_flops is not None:
        lines.append("  roofline estimate: n/a (some kernel or loop FLOPs are not counted; see the notes)")
    lines.append(f"  compiled in {step.compile_s:.0f} s")
    return "\n".join(lines)
