"""`jaxwrite compile --config configs/RECIPE.py:TARGET [--topology NAME] [--json OUT.json]`: compiles the
recipe's steps for its TPU slice on this host and says whether each fits (exit 0 all fit, 1 one does
not, 2 bad input or no libtpu)."""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

from jaxwrite.common import InputError

# An assumption, stated wherever it is used: LongWriter-Zero does not publish its answers' length
# distribution; a median of 4k tokens with a long tail to the 14k cap.
DEFAULT_LENGTHS = "lognormal:median=4000,sigma=0.7"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "compile", help="compile a recipe's steps for a TPU slice without a TPU: HBM per chip, FLOPs, MFU estimate",
        description="Builds the recipe as `jaxwrite train` would (model, optimiser, mesh, sharding rules, "
                    "jitted steps) with abstract parameters and compiles each step with the real TPU compiler "
                    "(libtpu, no TPU hardware): the train step, plus the rollout engine's prefill and decode "
                    "for GRPO and the scoring engine for the critic. Prints per-device HBM against the chip, "
                    "compiled vs model FLOPs, a roofline estimate of step time and MFU, and for decode steps the "
                    "bytes one step reads and writes beside the ideal (weights + filled KV + one new slot) at "
                    "three cache fills. Exit status: 0 every "
                    "step fits, 1 some step does not fit, 2 bad input or libtpu missing.")
    parser.add_argument("--config", required=True,
                        help="a recipe and its target, e.g. configs/cpt_qwen2.5_32b_32k.py:v5p-128")
    parser.add_argument("--topology", default="",
                        help="TPU slice to compile for (v5p-128, v6e-16, v5e-8, or v5p:4x4x4); default: the "
                             "recipe's target")
    parser.add_argument("--json", default="", help="also write the figures to this file")
    parser.add_argument("--step", action="append", default=[],
                        help="compile only this step (train_step, rollout_prefill, rollout_decode, "
                             "scoring_prefill, scoring_decode); repeatable")
    parser.add_argument("--prompt-tokens", type=int, default=0,
                        help="GRPO prompt length the rollout rows are sized from (default 512)")
    parser.add_argument("--estimate", action="store_true",
                        help="GRPO: compose the compiled steps into a step-time estimate (rollout prefill and "
                             "decode replayed over --lengths, RM scoring, update) for the synchronous, "
                             "asynchronous and partial-rollout schedules")
    parser.add_argument("--lengths", default=DEFAULT_LENGTHS,
                        help="answer lengths of the estimate: lognormal:median=M,sigma=S, uniform:LO-HI, fixed:N "
                             f"or a run's rollout_samples.jsonl (default {DEFAULT_LENGTHS}, capped at "
                             "rl.max_new_tokens)")
    parser.add_argument("--rm-config", default="",
                        help="the writing RM's recipe (e.g. configs/rm_qwen2.5_72b.py): its scoring call is "
                             "compiled on the policy's slice and counted in the estimate")
    parser.set_defaults(func=run, takes_config=True)


def _topology_name(args) -> str:
    if args.topology:
        return args.topology
    _, _, target = args.config.rpartition(":")
    if not target or "/" in target or target.endswith(".py"):
        raise InputError("this recipe names no target; pass --topology (e.g. --topology v5e-8)", field="--topology")
    if target == "gpu":
        raise InputError("target 'gpu' is not a TPU slice; pass --topology to compile for one", field="--topology")
    return target


def run(args: argparse.Namespace) -> int:
    # Several processes (tests, a benchmark loop) may load libtpu at once; compile-only use is safe.
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")   # not on a TPU VM: skip the metadata server
    from jaxwrite.aot.abstract import GRPO_PROMPT_TOKENS
    from jaxwrite.aot.compile import LibtpuMissing, compile_recipe
    from jaxwrite.aot.report import describe
    from jaxwrite.parallel.chips import parse_topology
    from jaxwrite.train import load_recipe

    config = load_recipe(args.config, args.config_overrides)
    topology = _topology_name(args)

    parse_topology(topology)   # a bad name fails before anything is built
    if args.estimate and args.step:
        raise InputError("--estimate composes every step of the recipe; leave out --step", field="--step")
    print(f"jaxwrite compile: {args.config} for {topology}", file=sys.stderr)
    progress = lambda step: print(describe(step), flush=True)  # noqa: E731
    estimates = costs = None
    try:
        if args.estimate:
            from jaxwrite.aot.grpo_estimate import describe_estimates, estimate_recipe
            rm_config = load_recipe(args.rm_config, []) if args.rm_config else None
            report, costs, estimates, lengths = estimate_recipe(config, topology, args.lengths, rm_config,
                                                         args.prompt_tokens or GRPO_PROMPT_TOKENS, progress)
            report.recipe = args.config
            print(describe_estimates(estimates, args.lengths, lengths))
            if rm_config is None:
                print("(no writing-RM scoring in the estimate: pass --rm-config RECIPE)")
        else:
            report = compile_recipe(config, topology, recipe=args.config, only=tuple(args.step),
                                    prompt_tokens=args.prompt_tokens or GRPO_PROMPT_TOKENS, progress=progress)
    except LibtpuMissing as err:
        print(f"jaxwrite compile: error: {err}", file=sys.stderr)
        return 2
    if args.json:
        out = report.as_json()
        if estimates is not None:
            out["estimate"] = {"lengths": args.lengths, "rm_config": args.rm_config,
                               "costs": dataclasses.asdict(costs), "schedules": [e.as_json() for e in estimates]}
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=2)
    print(f"{'all steps fit' if report.fits else 'some steps do not fit'} on {report.topology} "
          f"({report.devices} x {report.chip}, mesh {report.mesh})")
    return 0 if report.fits else 1
