"""Matmul FLOPs of a compiled (per-device) HLO module, with loop trip counts applied.

`compiled.cost_analysis()` counts the body of a while loop once, so a 64-layer scan inside an
8-microbatch scan is undercounted 512-fold. This walks the optimised HLO text instead: each
computation's FLOPs are its own dots and convolutions plus those of the computations it calls, a
while body counted by its trip count (`known_trip_count` where XLA keeps one, otherwise read from the
loop's condition, body and initial tuple: jaxwrite.aot.hlo_loops; a loop whose trip count cannot be
read counts once and is reported, unless it runs under a named scope the caller gives an assumed
trip count for: `run_time_trips`, e.g. attention over the filled part of a KV cache, counted at the
fill the step's model FLOPs assume). Only matmuls count (2 per multiply-add), which is what MFU
compares against; elementwise work is left out. Pallas kernels are custom calls whose FLOPs XLA cannot
see: the ones jaxwrite runs (its log-prob kernels, causal splash attention) are counted from their
operands and metadata (jaxwrite.aot.kernel_flops); any other kernel is counted as a call whose FLOPs
are missing, so a report can say so.
"""
from __future__ import annotations

import dataclasses
import math
import re

from jaxwrite.aot.hlo_loops import Instruction, Module, trip_count
from jaxwrite.aot.kernel_flops import kernel_flops

_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->\s*.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*?)\s+([\w\-]+)\((.*)$")
_ARRAY = re.compile(r"([a-z]+\d*)\[([\d,]*)\]")
_CALLS = re.compile(r"(?:calls|to_apply|body|condition)=%?([\w.\-]+)")
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")
_TRIP = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"?(\d+)')
_DIMS = {name: re.compile(name + r"=\{([\d,]*)\}") for name in ("lhs_contracting_dims",)}
_LABELS = re.compile(r"dim_labels=([\w]+)_([\w]+)->([\w]+)")


@dataclasses.dataclass
class HloFlops:
    flops: float = 0.0            # matmul FLOPs per device, loops counted by their trip counts
    unknown_loops: int = 0        # while loops without a known trip count (counted once)
    custom_calls: int = 0         # custom-call sites (Pallas kernels) whose FLOPs are not included
    assumed_loops: int = 0        # run-time-bounded loops counted at the trips the caller assumes


def _dims(shape_text: str) -> list[int]:
    match = _ARRAY.search(shape_text)
    if not match or not match.group(2):
        return []
    return [int(d) for d in match.group(2).split(",")]


def _operand_names(args: str) -> list[str]:
    # "f32[4,6]{1,0} %a, f32[6,8]{1,0} %b), lhs_..." -> ["a", "b"]
    depth, end = 0, len(args)
    for i, ch in enumerate(args):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                end = i
                break
            depth -= 1
    return re.findall(r"%([\w.\-]+)", args[:end])


def _dot_flops(out: list[int], lhs: list[int], attrs: str) -> float:
    match = _DIMS["lhs_contracting_dims"].search(attrs)
    contracting = [int(d) for d in match.group(1).split(",")] if match and match.group(1) else []
    k = math.prod(lhs[d] for d in contracting if d < len(lhs)) if contracting else 1
    return 2.0 * math.prod(out) * k


def _window(attrs: str) -> dict[str, list[list[int]]]:
    """window={size=2x2 pad=0_0x1_1 lhs_dilate=2x1 ...} -> {"size": [[2], [2]], "pad": [[0, 0], [1, 1]], ...}."""
    match = re.search(r"window=\{([^}]*)\}", attrs)
    out: dict[str, list[list[int]]] = {}
    for item in (match.group(1).split() if match else ()):
        key, _, value = item.partition("=")
        out[key] = [[int(v) for v in dim.split("_")] for dim in value.split("x")]
    return out


def _real_taps(lhs: int, out: int, size: int, pad_lo: int, lhs_dilate: int, stride: int, rhs_dilate: int) -> int:
    """Kernel taps that land on real (not padding, not dilation-hole) input elements, summed over the
    `out` positions of one spatial dimension. XLA's TPU pipeline writes batched matmuls as convolutions
    whose batch dimensions are windows over dilated or padded inputs, so most taps there are empty."""
    last = (lhs - 1) * lhs_dilate          # position of the last real element in the dilated input
    total = 0
    for o in range(out):
        start = o * stride - pad_lo
        if rhs_dilate == 1:
            lo, hi = max(0, start), min(last, start + size - 1)
            if hi >= lo:   # multiples of lhs_dilate in [lo, hi]
                total += hi // lhs_dilate - (lo + lhs_dilate - 1) // lhs_dilate + 1
        else:
            total += sum(1 for w in range(size) if 0 <= start + w * rhs_dilate <= last
                         and (start + w * rhs_dilate) % lhs_dilate == 0)
    return total


def _conv_flops(out: list[int], lhs: list[int], rhs: list[int], attrs: str) -> float:
    """2 x multiply-adds that touch real inputs: out batch x out features x kernel input features x
    the real taps of every spatial dimension."""
    match = _LABELS.search(attrs)
    if not match or not rhs or not lhs:
        return 0.0
    lhs_labels, rhs_labels, out_labels = match.groups()
    spatial = sorted(c for c in out_labels if c.isdigit())
    window = _window(attrs)
    per_dim = lambda key, d, default: window.get(key, [[default]] * len(spatial))[d]  # noqa: E731
    flops = 2.0 * out[out_labels.index("b")] * out[out_labels.index("f")] * rhs[rhs_labels.index("i")]
    for d, label in enumerate(spatial):
        size = per_dim("size", d, 1)[0]
        pad = per_dim("pad", d, 0)
        flops *= _real_taps(lhs[lhs_labels.index(label)], out[out_labels.index(label)], size, pad[0],
                            per_dim("lhs_dilate", d, 1)[0], per_dim("stride", d, 1)[0],
                            per_dim("rhs_dilate", d, 1)[0])
    return flops


_NEW_INSTRUCTION = re.compile(r"^\s+(?:ROOT\s+)?%?[\w.\-]+\s*=\s")


def _instructions(text: str):
    """The module's lines with each instruction on one line: a custom call's attributes (Pallas
    kernel metadata) can span several, until its braces close (or the next instruction starts)."""
    pending, depth = "", 0
    for line in text.splitlines():
        if depth > 0 and not _NEW_INSTRUCTION.match(line) and line[:1] in ('"', "}", " ", "\t"):
            pending += " " + line.strip()
        else:
            if pending:
                yield pending
                pending = ""
            if not line.startswith(" "):
                depth = 0
                yield line
                continue
            pending = line
        depth = pending.count("{") - pending.count("}")
        if depth <= 0:
            yield pending
            pending, depth = "", 0
    if pending:
        yield pending


def _parse(text: str):
    """-> ({computation: [own flops, [(callee, multiplier)], unknown loops, uncounted kernel calls]},
    entry name, the module's instructions for trip counts)."""
    comps, entry, current = {}, None, None
    shapes: dict[str, str] = {}
    module = Module()
    for line in _instructions(text):
        header = _COMPUTATION.match(line)
        if header and not line.startswith(" "):
            current = header.group(1)
            comps[current] = [0.0, [], 0, 0]
            if line.startswith("ENTRY"):
                entry = current
            # Parameters carry their shapes in the header: "(p0: f32[4,6], p1: ...)".
            for name, shape in re.findall(r"([\w.\-]+):\s*([a-z]+\d*\[[\d,]*\])", line):
                shapes[name] = shape
            continue
        if current is None:
            continue
        inst = _INSTRUCTION.match(line)
        if not inst:
            continue
        name, shape, opcode, rest = inst.groups()
        shapes[name] = shape
        entry_ = comps[current]
        operands = _operand_names(rest)
        module.instructions[name] = Instruction(opcode, tuple(operands), rest)
        module.shapes[name] = shape
        module.order.setdefault(current, []).append(name)
        if line.lstrip().startswith("ROOT"):
            module.roots[current] = name
        if opcode == "parameter":
            index = int(rest.split(")", 1)[0])
            module.param_index.setdefault(current, {})[index] = name
            if index == 0:
                module.params[current] = [name]
        if opcode in ("dot", "convolution"):
            if len(operands) >= 2:
                out = _dims(shape)
                lhs, rhs = _dims(shapes.get(operands[0], "")), _dims(shapes.get(operands[1], ""))
                entry_[0] += _dot_flops(out, lhs, rest) if opcode == "dot" else _conv_flops(out, lhs, rhs, rest)
        elif opcode == "custom-call" and "tpu_custom_call" in rest:
            flops = kernel_flops(name, rest, shape)
            if flops is None:
                entry_[3] += 1
            else:
                entry_[0] += flops
        if opcode == "while":
            trip = _TRIP.search(rest)
            cond = re.search(r"condition=%?([\w.\-]+)", rest)
            body = re.search(r"body=%?([\w.\-]+)", rest)
            if body:   # the multiplier is resolved in hlo_flops, once every computation has been read
                op_name = re.search(r'op_name="([^"]*)"', rest)
                loop = ("loop", cond.group(1) if cond else "", operands[0] if operands else "",
                        int(trip.group(1)) if trip else None, op_name.group(1) if op_name else "")
                entry_[1].append((body.group(1), loop))
        else:
            for callee in _CALLS.findall(rest):
                entry_[1].append((callee, 1))
            branches = _BRANCHES.search(rest)
            if branches:   # a conditional runs one branch: count the costliest
                entry_[1].append(("|".join(re.findall(r"%?([\w.\-]+)", branches.group(1))), 1))
    return comps, entry, module


def loop_trips(module: Module, body: str, cond: str, init: str, known: int | None, op_name: str,
               run_time_trips: dict[str, float] | None) -> tuple[float, str]:
    """(trips, how they were found: "static", "assumed" from run_time_trips by named scope, or
    "unknown", counted once) of one while loop."""
    times = known if known is not None else trip_count(module, cond, body, init)
    if times is not None:
        return times, "static"
    assumed = [n for scope, n in (run_time_trips or {}).items() if scope in op_name]
    if assumed:
        return assumed[0], "assumed"
    return 1, "unknown"


def hlo_flops(text: str, run_time_trips: dict[str, float] | None = None) -> HloFlops:
    """Matmul FLOPs of the entry computation of an HLO module's text (see module docstring).
    run_time_trips: {named scope: trips} for loops whose trip count is set at run time."""
    comps, entry, module = _parse(text)
    memo: dict[str, HloFlops] = {}

    def total(name: str) -> HloFlops:
        if "|" in name:
            options = [total(n) for n in name.split("|") if n in comps]
            return max(options, key=lambda f: f.flops) if options else HloFlops()
        if name in memo or name not in comps:
            return memo.get(name, HloFlops())
        own, callees, unknown, custom = comps[name]
        out = HloFlops(own, unknown, custom)
        memo[name] = HloFlops()   # guards against cycles while recursing
        for callee, times in callees:
            if isinstance(times, tuple):      # a while body: ("loop", condition, initial tuple, known trips, op_name)
                _, cond, init, known, op_name = times
                times, kind = loop_trips(module, callee, cond, init, known, op_name, run_time_trips)
                out.assumed_loops += kind == "assumed"
                out.unknown_loops += kind == "unknown"
            sub = total(callee)
            out.flops += times * sub.flops
            out.unknown_loops += sub.unknown_loops
            out.custom_calls += round(times * sub.custom_calls)
            out.assumed_loops += sub.assumed_loops
        memo[name] = out
        return out

    if entry is None:
        return HloFlops()
    return total(entry)
