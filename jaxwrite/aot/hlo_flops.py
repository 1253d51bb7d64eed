"""Matmul FLOPs of a compiled (per-device) HLO module, with loop trip counts applied.

`compiled.cost_analysis()` counts the body of a while loop once, so a 64-layer scan inside an
8-microbatch scan is undercounted 512-fold. This walks the optimised HLO text instead: each
computation's FLOPs are its own dots and convolutions plus those of the computations it calls, a
while body counted `known_trip_count` times (XLA annotates the trip count of counted loops; a loop
without one counts once and is reported). Only matmuls count (2 per multiply-add), which is what MFU
compares against; elementwise work is left out. Pallas kernels are custom calls whose FLOPs XLA cannot
see: jaxwrite's own log-prob kernels are counted from their operand shapes (KERNEL_MATMULS), any other
kernel is counted as a call whose FLOPs are missing, so a report can say so.

XLA's TPU pipeline does not keep a `known_trip_count` on the loops of a scan, so a loop's trip count
is read from its condition: a scan's counter starts at 0, steps by 1 and runs while `i < N`.
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
_CONSTANT = re.compile(r"^s32\[\]")
_LAYOUTS = re.compile(r"operand_layout_constraints=\{(.*?)\}\}")

# jaxwrite's Pallas log-prob kernels (jaxwrite.kernels): how many [n, D] x [D, V] matmuls each runs
# (the backward kernels recompute the logit tile before their own product).
KERNEL_MATMULS = {"logprob_forward": 1, "logprob_dh": 2, "logprob_dw": 2}


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


def _kernel_flops(name: str, rest: str) -> float | None:
    """FLOPs of a known Pallas kernel call from its operands' shapes, None for an unknown kernel."""
    kernel = next((k for k in KERNEL_MATMULS if name.startswith(k)), None)
    layouts = _LAYOUTS.search(rest)
    if kernel is None or not layouts:
        return None
    shapes = [_dims(m.group(0)) for m in _ARRAY.finditer(layouts.group(1))]
    if len(shapes) < 2 or len(shapes[0]) != 2 or len(shapes[1]) != 2:
        return None
    (n, d), (_, v) = shapes[0], shapes[1]
    return KERNEL_MATMULS[kernel] * 2.0 * n * d * v


def _parse(text: str):
    """-> ({computation: [own flops, [(callee, multiplier)], unknown loops, uncounted kernel calls]},
    entry name)."""
    comps, entry, current = {}, None, None
    shapes: dict[str, str] = {}
    constants: dict[str, int] = {}
    limits: dict[str, int] = {}          # loop condition computation -> N of its `i < N`
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
        if opcode == "constant" and _CONSTANT.match(shape):
            value = re.match(r"\s*(-?\d+)\)", rest)
            if value:
                constants[name] = int(value.group(1))
        if opcode == "compare" and "direction=LT" in rest and line.lstrip().startswith("ROOT"):
            bound = [constants[o] for o in _operand_names(rest)[1:2] if o in constants]
            if bound:
                limits[current] = bound[0]
        if opcode in ("dot", "convolution"):
            operands = _operand_names(rest)
            if len(operands) >= 2:
                out = _dims(shape)
                lhs, rhs = _dims(shapes.get(operands[0], "")), _dims(shapes.get(operands[1], ""))
                entry_[0] += _dot_flops(out, lhs, rest) if opcode == "dot" else _conv_flops(out, lhs, rhs, rest)
        elif opcode == "custom-call" and "tpu_custom_call" in rest:
            flops = _kernel_flops(name, rest)
            if flops is None:
                entry_[3] += 1
            else:
                entry_[0] += flops
        if opcode == "while":
            trip = _TRIP.search(rest)
            cond = re.search(r"condition=%?([\w.\-]+)", rest)
            body = re.search(r"body=%?([\w.\-]+)", rest)
            if body:   # the multiplier is resolved in hlo_flops, once every condition has been read
                entry_[1].append((body.group(1), ("loop", cond.group(1) if cond else "",
                                                  int(trip.group(1)) if trip else None)))
        else:
            for callee in _CALLS.findall(rest):
                entry_[1].append((callee, 1))
            branches = _BRANCHES.search(rest)
            if branches:   # a conditional runs one branch: count the costliest
                entry_[1].append(("|".join(re.findall(r"%?([\w.\-]+)", branches.group(1))), 1))
    return comps, entry, limits


def hlo_flops(text: str) -> HloFlops:
    """Matmul FLOPs of the entry computation of an HLO module's text (see module docstring)."""
    comps, entry, limits = _parse(text)
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
            if isinstance(times, tuple):      # a while body: ("loop", condition, known trip count)
                _, cond, known = times
                times = known if known is not None else limits.get(cond)
                if times is None:
                    out.unknown_loops += 1
                    times = 1
            sub = total(callee)
            out.flops += times * sub.flops
            out.unknown_loops += sub.unknown_loops
            out.custom_calls += times * sub.custom_calls
        memo[name] = out
        return out

    if entry is None:
        return HloFlops()
    return total(entry)
