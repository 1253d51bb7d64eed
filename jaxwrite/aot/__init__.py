"""Ahead-of-time compilation of a recipe's steps for a TPU slice on a CPU host (`jaxwrite compile`):
per-device HBM against the chip, compiled vs model FLOPs, a labelled roofline estimate, and each decode
step's bytes per step beside the ideal; a GRPO step's time under several rollout schedules, composed
from the compiled steps (grpo_estimate)."""
from jaxwrite.aot.compile import CompileReport, LibtpuMissing, compile_recipe, have_libtpu
from jaxwrite.aot.grpo_estimate import describe_estimates, estimate_recipe
from jaxwrite.aot.hlo_bytes import hlo_bytes
from jaxwrite.aot.hlo_flops import HloFlops, hlo_flops
from jaxwrite.aot.report import StepReport, describe

__all__ = ["CompileReport", "LibtpuMissing", "compile_recipe", "have_libtpu", "describe_estimates",
           "estimate_recipe", "hlo_bytes", "HloFlops", "hlo_flops",
           "StepReport", "describe"]
