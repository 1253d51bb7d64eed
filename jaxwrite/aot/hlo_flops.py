"""Matmul FLOPs of a compiled (per-device) HLO module, with loop trip counts applied.

`compiled.cost_analysis()` counts the body of a while loop once, so a 64-layer scan inside an
8-microbatch scan is undercounted 512-fold. This walks the optimised HLO text instead: each
computation's FLOPs are its own dots and convolutions plus those of the computations it calls, a
while body counted `known_trip_count` times (XLA annotates the trip count of counted loops; a loop
without one counts once and is reported). Only matmuls count (2 per multiply-add), which is what MFU
compares against; elementwise work is left out. Pallas kernels are custom calls whose FLOPs XLA cannot
see; they are counted separately so a report can say so.
"""
from __future__ import annotations

import dataclasses
import math
import re

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


def _conv_flops(out: list[int], rhs: list[int], attrs: str) -> float:
    match = _LABELS.search(attrs)
    if not match or not rhs:
        return 0.0
    kernel_labels = match.group(2)
    out_feature = kernel_labels.index("o") if "o" in kernel_labels else None
    per_output = math.prod(rhs) // (rhs[out_feature] if out_feature is not None else 1)
    return 2.0 * math.prod(out) * per_output


def _parse(text: str):
    """-> {computation: (own flops, [(callee, multiplier)], unknown loops, custom calls)}, entry name."""
    comps, entry, current = {}, None, None
    shapes: dict[str, str] = {}
    for line in text.splitlines():
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
        if opcode in ("dot", "convolution"):
            operands = _operand_names(rest)
            if len(operands) >= 2:
                out = _dims(shape)
                lhs, rhs = _dims(shapes.get(operands[0], "")), _dims(shapes.get(operands[1], ""))
                entry_[0] += _dot_flops(out, lhs, rest) if opcode == "dot" else _conv_flops(out, rhs, rest)
        elif opcode == "custom-call" and "tpu_custom_call" in rest:
            entry_[3] += 1
        if opcode == "while":
            trip = _TRIP.search(rest)
            times = int(trip.group(1)) if trip else 1
            entry_[2] += 0 if trip else 1
            for callee in _CALLS.findall(rest):
                entry_[1].append((callee, times))
        else:
            for callee in _CALLS.findall(rest):
                entry_[1].append((callee, 1))
            branches = _BRANCHES.search(rest)
            if branches:   # a conditional runs one branch: count the costliest
                entry_[1].append(("|".join(re.findall(r"%?([\w.\-]+)", branches.group(1))), 1))
    return comps, entry


def hlo_flops(text: str) -> HloFlops:
    """Matmul FLOPs of the entry computation of an HLO module's text (see module docstring)."""
    comps, entry = _parse(text)
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
            sub = total(callee)
            out.flops += times * sub.flops
            out.unknown_loops += sub.unknown_loops
            out.custom_calls += times * sub.custom_calls
        memo[name] = out
        return out

    if entry is None:
        return HloFlops()
    return total(entry)
