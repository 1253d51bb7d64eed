"""Compiles a recipe's steps for a TPU slice on this host (no TPU needed: libtpu's compile-only devices).

    report = compile_recipe(config, "v5p-128")   # -> CompileReport, one StepReport per step

The recipe is built as `jaxwrite train` builds it (jaxwrite.aot.abstract), on a mesh of the slice's
devices with the recipe's mesh shape and the default logical-axis rules, and each step goes through
the real TPU compiler (Mosaic for Pallas kernels) inside `building_for("tpu")`, so every choice made
by platform (log-prob kernel, attention) is the one a TPU run makes.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import time

import ml_collections

from jaxwrite.aot.abstract import GRPO_PROMPT_TOKENS, abstract_run
from jaxwrite.aot.hlo_bytes import hlo_bytes
from jaxwrite.aot.hlo_flops import hlo_flops
from jaxwrite.aot.report import StepReport, from_compiled, from_error
from jaxwrite.aot.steps import recipe_steps
from jaxwrite.common import InputError, building_for
from jaxwrite.parallel import DEFAULT_RULES, make_mesh, resolve_mesh_shape, use_rules_only
from jaxwrite.parallel.chips import Topology, parse_topology, topology_devices
from jaxwrite.train import TrainConfig


class LibtpuMissing(RuntimeError):
    """libtpu is not installed: nothing can be compiled for a TPU."""


def have_libtpu() -> bool:
    # A presence check only: libtpu comes with the `tpu` extra (jax[tpu]) and is loaded by JAX itself.
    return importlib.util.find_spec("libtpu") is not None


@dataclasses.dataclass
class CompileReport:
    recipe: str
    topology: str
    compiler_topology: str
    chip: str
    devices: int
    mesh: tuple[int, ...]
    steps: list[StepReport]

    @property
    def fits(self) -> bool:
        return all(s.fits for s in self.steps)

    def as_json(self) -> dict:
        out = dataclasses.asdict(self)
        out["steps"] = [s.as_json() for s in self.steps]
        out["fits"] = self.fits
        return out


def _devices(topology: Topology):
    if not have_libtpu():
        raise LibtpuMissing('libtpu is not installed; install the TPU extra: pip install -e ".[tpu]"')
    return topology_devices(topology)


def decode_step_bytes(hlo_text: str, traffic) -> list[dict]:
    """Per fill of `traffic` (a steps.DecodeTraffic): one decode step's compiled bytes per device (the
    compiled call's, over its steps) beside the ideal."""
    rows = []
    for fill in traffic.fills:
        compiled = hlo_bytes(hlo_text, traffic.run_time_trips(fill)) / traffic.steps
        ideal = traffic.ideal(fill)
        rows.append({"fill": fill, "compiled_bytes": compiled, "ideal_bytes": ideal, "ratio": compiled / ideal})
    return rows


def compile_recipe(config: TrainConfig | ml_collections.ConfigDict, topology_name: str, recipe: str = "",
                   only: tuple[str, ...] = (), prompt_tokens: int = GRPO_PROMPT_TOKENS,
                   progress=None, rm_config=None, on_compiled=None) -> CompileReport:
    """Compiles every step of `config` (a TrainConfig, or a recipe's ConfigDict, typed here) or those named
    in `only` for `topology_name`. rm_config: a GRPO run's writing-RM recipe (its scoring call is
    compiled too, as `rm_score`); on_compiled(step, compiled, report) sees each compiled program (the
    GRPO step-time estimate reads their HLO)."""
    config = TrainConfig.from_recipe(config)
    topology = parse_topology(topology_name)
    try:
        mesh_shape = resolve_mesh_shape(tuple(config.mesh), topology.num_chips)
    except ValueError as err:
        raise InputError(f"{err} (topology {topology.name} has {topology.num_chips} chips)", field="mesh") from None
    devices = _devices(topology)
    mesh, rules = make_mesh(mesh_shape, devices), DEFAULT_RULES
    run = abstract_run(config)
    rm = abstract_run(TrainConfig.from_recipe(rm_config)) if rm_config is not None else None
    reports = []
    with building_for("tpu"):
        builders = recipe_steps(run, mesh, rules, prompt_tokens, rm)
        names = [name for name, _ in builders]
        unknown = [name for name in only if name not in names]
        if unknown:
            raise InputError(f"no step named {', '.join(unknown)}; this recipe compiles: {', '.join(names)}",
                             field="--step")
        for name, build in builders:
            if only and name not in only:
                continue
            step = build()
            per_device_model = step.model_flops / len(devices)
            began = time.perf_counter()
            try:
                with use_rules_only(mesh, step.rules or rules):   # shardings are explicit; see use_rules_only
                    compiled = step.fn.lower(*step.args).compile()
            except Exception as err:   # the compiler's verdict (out of memory, ...) is the report
                if "RESOURCE_EXHAUSTED" not in str(err) and "memory" not in str(err).lower():
                    raise
                report = from_error(step.name, err, topology.chip, per_device_model,
                                    time.perf_counter() - began, step.notes)
            else:
                counted = hlo_flops(compiled.as_text(), step.run_time_trips)
                notes = step.notes
                if counted.assumed_loops:
                    blocks = f"{max(step.run_time_trips.values()):g}"
                    notes += (f"; run-time attention loop over the cache counted at the fill the model FLOPs assume "
                              f"({blocks} key blocks per query block)")
                if counted.custom_calls:
                    notes += f"; {counted.custom_calls} Pallas kernel call(s) not in the compiled FLOPs"
                if counted.unknown_loops:
                    notes += f"; {counted.unknown_loops} loop(s) without a known trip count counted once"
                report = from_compiled(step.name, compiled, topology.chip, counted.flops, per_device_model,
                                       step.reads_per_call, time.perf_counter() - began, notes,
                                       complete=not (counted.custom_calls or counted.unknown_loops))
                if step.traffic is not None:
                    report.step_bytes = decode_step_bytes(compiled.as_text(), step.traffic)
                if on_compiled is not None:
                    on_compiled(step, compiled, report)
            reports.append(report)
            if progress is not None:
                progress(report)
    return CompileReport(recipe, topology.name, topology.compiler_name, topology.chip.name, len(devices),
                         tuple(mesh_shape), reports)
