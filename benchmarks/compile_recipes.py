"""Every real-size recipe compiled for its TPU targets (`jaxwrite compile`), as the tables in docs/TPU.md:
every step's HBM, FLOPs and roofline, and each decode step's bytes per step beside the ideal.

  python benchmarks/compile_recipes.py                      # compile what has no result yet, then render
  python benchmarks/compile_recipes.py --only cpt_32b_32k   # one entry (re-compiles it)
  python benchmarks/compile_recipes.py --render             # only rewrite the table from saved results
  python benchmarks/compile_recipes.py --only grpo_32b --step rollout_decode   # re-compile one step, keep the rest

Each compile runs as its own `jaxwrite compile --json` process, one at a time (a real-size compile
takes minutes of CPU), and its JSON is kept in benchmarks/results/compile/. The table lists every
entry of RECIPES: one that has no result yet reads "not yet compiled", never a guess.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "benchmarks", "results", "compile")
DOC = os.path.join(REPO, "docs", "TPU.md")
BEGIN, END = "<!-- compile_recipes:begin -->", "<!-- compile_recipes:end -->"
BYTES_BEGIN, BYTES_END = "<!-- decode_bytes:begin -->", "<!-- decode_bytes:end -->"

# (key, recipe argument, topology, extra args)
RECIPES = (
    ("critic_sft_7b", "configs/critic_sft_qwen2.5_7b.py:v5p-32", "v5p-32", ()),
    ("cpt_32b_32k", "configs/cpt_qwen2.5_32b_32k.py:v5p-128", "v5p-128", ()),
    ("rm_72b", "configs/rm_qwen2.5_72b.py:v5p-128", "v5p-128", ()),
    ("writer_sft_7b", "configs/writer_sft_qwen2.5_7b.py:v5p-32", "v5p-32", ()),
    ("writer_sft_8b", "configs/writer_sft_llama3.1_8b.py:v5p-32", "v5p-32", ()),
    ("grpo_32b", "configs/grpo_longwriter_zero_32b.py:v5p-128", "v5p-128", ()),
    ("critic_sft_7b_v6e", "configs/critic_sft_qwen2.5_7b.py:v6e-16", "v6e-16", ()),
    ("cpt_32b_32k_v6e", "configs/cpt_qwen2.5_32b_32k.py:v6e-256", "v6e-256", ()),
    ("rm_72b_v6e", "configs/rm_qwen2.5_72b.py:v6e-256", "v6e-256", ()),
    ("grpo_32b_v6e", "configs/grpo_longwriter_zero_32b.py:v6e-256", "v6e-256", ()),
    ("writer_sft_7b_v4", "configs/writer_sft_qwen2.5_7b.py:v4-32", "v4-32", ()),
    ("writer_sft_8b_v4", "configs/writer_sft_llama3.1_8b.py:v4-32", "v4-32", ()),
)


def compile_one(key: str, recipe: str, topology: str, extra: tuple[str, ...], steps: tuple[str, ...] = ()) -> int:
    """Compiles one entry into its saved JSON; with `steps`, only those steps, replacing them in the saved
    result by name and keeping the entry's other steps (a real-size train step takes many CPU minutes)."""
    os.makedirs(RESULTS, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "XLA_FLAGS")}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    saved = os.path.join(RESULTS, f"{key}.json")
    out = saved + ".steps" if steps else saved
    cmd = ["nice", "-n", "10", sys.executable, "-m", "jaxwrite", "compile", "--config", recipe,
           "--topology", topology, "--json", out, *extra, *(a for s in steps for a in ("--step", s))]
    print(" ".join(cmd[3:]), flush=True)
    began = time.time()
    status = subprocess.call(cmd, cwd=REPO, env=env)
    print(f"{key}: exit {status} after {time.time() - began:.0f} s", flush=True)
    if steps and os.path.exists(out):
        new = json.load(open(out, encoding="utf-8"))
        if os.path.exists(saved):
            fresh = {s["name"]: s for s in new["steps"]}
            old = json.load(open(saved, encoding="utf-8"))
            names = [s["name"] for s in old["steps"]]
            new["steps"] = [fresh.get(s["name"], s) for s in old["steps"]] + [
                s for s in new["steps"] if s["name"] not in names]
            new["fits"] = all(s["fits"] for s in new["steps"])
        with open(saved, "w", encoding="utf-8") as f:
            json.dump(new, f, indent=2)
        os.remove(out)
    return status


def _gib(n) -> str:
    return "?" if n is None else f"{n / 2 ** 30:.1f}"


def render() -> str:
    lines = ["| recipe | target | step | HBM / chip (GiB) | of (GiB) | margin (GiB) | fits | compiled / model FLOPs "
             "| est. MFU (roofline) |", "|---|---|---|---|---|---|---|---|---|"]
    for key, recipe, topology, extra in RECIPES:
        path = os.path.join(RESULTS, f"{key}.json")
        name = recipe + ("".join(" " + e for e in extra))
        if not os.path.exists(path):
            lines.append(f"| `{name}` | {topology} | — | not yet compiled | | | | | |")
            continue
        report = json.load(open(path, encoding="utf-8"))
        for step in report["steps"]:
            ratio = (f"{step['compiled_flops'] / step['model_flops']:.2f}"
                     if step.get("compiled_flops") and step.get("model_flops") else "—")
            mfu = f"{100 * step['estimated_mfu']:.0f} %" if step.get("estimated_mfu") is not None else "—"
            if step.get("compiled_flops") is not None and not step.get("flops_complete", True):
                mfu = "n/a (kernel / loop FLOPs not all counted)"   # a bound, not an estimate
                ratio = f"≥ {ratio}" if ratio != "—" else ratio
            margin = step.get("margin_bytes")
            lines.append(f"| `{name}` | {topology} | {step['name']} | {_gib(step['hbm_bytes_per_device'])} | "
                         f"{_gib(step['hbm_capacity_bytes'])} | {_gib(margin)} | "
                         f"{'yes' if step['fits'] else '**no**'} | {ratio} | {mfu} |")
    return "\n".join(lines)


def render_decode_bytes() -> str:
    """One row per (decode step, cache fill) of the saved results that report step bytes."""
    lines = ["| recipe | target | step | cache fill | compiled bytes / step / chip (GiB) | ideal (GiB) | ratio |",
             "|---|---|---|---|---|---|---|"]
    for key, recipe, topology, _extra in RECIPES:
        path = os.path.join(RESULTS, f"{key}.json")
        if not os.path.exists(path):
            continue
        for step in json.load(open(path, encoding="utf-8"))["steps"]:
            for row in step.get("step_bytes") or ():
                lines.append(f"| `{recipe}` | {topology} | {step['name']} | {row['fill']:,} | "
                             f"{row['compiled_bytes'] / 2 ** 30:.2f} | {row['ideal_bytes'] / 2 ** 30:.2f} | "
                             f"{row['ratio']:.2f} |")
    return "\n".join(lines)


def write_doc(begin: str, end: str, table: str) -> None:
    text = open(DOC, encoding="utf-8").read()
    if begin not in text:
        raise SystemExit(f"{DOC} has no {begin} marker")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    with open(DOC, "w", encoding="utf-8") as f:
        f.write(head + begin + "\n" + table + "\n" + end + tail)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[], help="recipe keys to (re)compile")
    parser.add_argument("--render", action="store_true", help="only rewrite the docs table")
    parser.add_argument("--step", action="append", default=[],
                        help="with --only: re-compile only this step (repeatable), keeping the saved others")
    args = parser.parse_args()
    if args.step and not args.only:
        parser.error("--step needs --only")
    if not args.render:
        for key, recipe, topology, extra in RECIPES:
            done = os.path.exists(os.path.join(RESULTS, f"{key}.json"))
            if (args.only and key in args.only) or (not args.only and not done):
                compile_one(key, recipe, topology, extra, tuple(args.step))
    table, decode_bytes = render(), render_decode_bytes()
    write_doc(BEGIN, END, table)
    write_doc(BYTES_BEGIN, BYTES_END, decode_bytes)
    print(table + "\n\n" + decode_bytes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
