"""HBM bytes a compiled (per-device) HLO module reads and writes, with loop trip counts applied.

`compiled.cost_analysis()` counts a while body once, so it cannot say what a decode chunk of 32 steps
over a 28-layer scan moves. This walks the optimised HLO (parsed as jaxwrite.aot.hlo_flops parses
it) and counts, for every instruction that runs on its own (not inside a fusion), the bytes it reads
from its operands and writes to its result, loops multiplied by their trip counts (run-time-bounded
loops by the trips the caller assumes, as for FLOPs). A fusion is one kernel: its operands are read
once and its result written once, except where the fused code shows it touches less:
- an operand the fusion only slices (dynamic-slice, slice, gather, through bitcasts, reshapes,
  converts, copies and transposes, nested fusions included) is read for the slices' bytes only: a
  layer's weights out of the stacked [L, ...] array, one key block out of the KV cache;
- a result that updates an operand in place (a dynamic-update-slice or scatter at the root whose
  operand is a fusion parameter) writes the update's bytes only, and that operand is not read.
A copy reads and writes its whole operand, which is how a program that copies its KV cache every step
shows: the counted bytes then exceed weights + cache. Parameters, tuples, bitcasts and constants move
nothing. Sizes are logical (elements x dtype size), before any tiling padding; arrays the compiler
placed in on-chip memory (a layout's memory space S(n), n > 0) move no HBM bytes.
"""
from __future__ import annotations

import math
import re

from jaxwrite.aot.hlo_flops import _parse, loop_trips
from jaxwrite.aot.hlo_loops import Module

# An array: dtype, dims and its layout (which may name a memory space: S(1) is on-chip VMEM on TPU).
_ARRAY = re.compile(r"\b(pred|s4|u4|s8|u8|s16|u16|s32|u32|s64|u64|f8e\w+|bf16|f16|f32|f64|c64|c128)\[([\d,]*)\]"
                    r"(\{[^{}]*(?:\([^)]*\)[^{}]*)*\})?")
_MEMORY_SPACE = re.compile(r"S\((\d+)\)")
_DTYPE_BYTES = {"pred": 1, "s4": 0.5, "u4": 0.5, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "bf16": 2, "f16": 2,
                "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}
_FREE = {"parameter", "get-tuple-element", "tuple", "bitcast", "constant", "after-all", "partition-id",
         "replica-id", "opt-barrier", "add-dependency", "domain", "copy-done", "all-gather-done",
         "all-reduce-done", "collective-permute-done", "async-done", "async-update", "send-done", "recv-done"}
_SLICES = {"dynamic-slice", "slice", "gather"}
_PASS_THROUGH = {"bitcast", "reshape", "convert", "copy", "transpose"}
_IN_PLACE = {"dynamic-update-slice", "scatter"}
_CALLS = re.compile(r"calls=%?([\w.\-]+)")


def array_bytes(shape_text: str) -> float:
    """HBM bytes of every array in an HLO shape ("f32[2,3]{1,0}", or a tuple of them); an array the
    layout places in another memory space (S(n), n > 0: on-chip VMEM, SMEM) costs no HBM traffic."""
    total = 0.0
    for dtype, dims, layout in _ARRAY.findall(shape_text):
        space = _MEMORY_SPACE.search(layout or "")
        if space and space.group(1) != "0":
            continue
        size = 1 if dtype.startswith("f8") else _DTYPE_BYTES.get(dtype, 1)
        total += math.prod(int(d) for d in dims.split(",") if d) * size
    return total


def _users(module: Module, computation: str) -> dict[str, list[tuple[str, int]]]:
    """{instruction: [(user, operand position)]} within one computation."""
    users: dict[str, list[tuple[str, int]]] = {}
    for name in module.order.get(computation, []):
        for i, operand in enumerate(module.instructions[name].operands):
            users.setdefault(operand, []).append((name, i))
    return users


def _read_bytes(module: Module, computation: str, value: str, users, depth: int = 0) -> float | None:
    """Bytes of `value` (an instruction of a fused computation) that the computation reads, when it
    only slices it; None when some use reads it whole."""
    total = 0.0
    for user, position in users.get(value, []):
        inst = module.instructions[user]
        if inst.opcode in _SLICES and position == 0:
            total += array_bytes(module.shapes[user])
        elif inst.opcode in _PASS_THROUGH and depth < 8:
            inner = _read_bytes(module, computation, user, users, depth + 1)
            if inner is None:
                return None
            total += inner
        elif inst.opcode in _IN_PLACE and position == 0 and module.roots.get(computation) == user:
            continue   # updated in place: not read
        elif inst.opcode == "fusion" and depth < 8:
            inner = _fused_operand_bytes(module, inst, position)
            if inner is None:
                return None
            total += inner
        else:
            return None
    return total


def _fused_operand_bytes(module: Module, fusion, position: int) -> float | None:
    callee = _CALLS.search(fusion.rest)
    if not callee:
        return None
    comp = callee.group(1)
    param = module.param_index.get(comp, {}).get(position)
    if param is None:
        return None
    return _read_bytes(module, comp, param, _users(module, comp))


def _fusion_bytes(module: Module, name: str) -> float:
    inst = module.instructions[name]
    callee = _CALLS.search(inst.rest)
    comp = callee.group(1) if callee else ""
    root = module.instructions.get(module.roots.get(comp, ""))
    written = array_bytes(module.shapes[name])
    if root is not None and root.opcode in _IN_PLACE:
        written = array_bytes(module.shapes[root.operands[-1]])       # the update (scatter: its updates)
    users = _users(module, comp)
    read = 0.0
    for i, operand in enumerate(inst.operands):
        param = module.param_index.get(comp, {}).get(i)
        sliced = _read_bytes(module, comp, param, users) if param is not None else None
        read += array_bytes(module.shapes.get(operand, "")) if sliced is None else sliced
    return read + written


def out_text_first(tuple_text: str) -> str:
    """The first array of a tuple shape text (a copy-start's destination)."""
    match = _ARRAY.search(tuple_text)
    return match.group(0) if match else ""


def instruction_bytes(module: Module, name: str) -> float:
    """HBM bytes one execution of instruction `name` (outside any fusion) reads and writes."""
    inst = module.instructions[name]
    op = inst.opcode
    if op in _FREE or op in ("while", "conditional", "call"):
        return 0.0
    if op == "fusion":
        return _fusion_bytes(module, name)
    out = array_bytes(module.shapes[name])
    if op in _SLICES:
        return 2 * out
    if op in _IN_PLACE:
        update = array_bytes(module.shapes.get(inst.operands[-1], ""))
        return 2 * update
    if op == "copy-start":   # the copy's bytes, counted once at its start (its result: (dest, source, ctx))
        return array_bytes(module.shapes.get(inst.operands[0], "")) + array_bytes(out_text_first(module.shapes[name]))
    return out + sum(array_bytes(module.shapes.get(o, "")) for o in inst.operands)


def hlo_bytes(text: str, run_time_trips: dict[str, float] | None = None) -> float:
    """HBM bytes read + written by one run of the entry computation of an HLO module's text, while
    loops counted by their trip counts (see module docstring and hlo_flops.loop_trips)."""
    comps, entry, module = _parse(text)
    memo: dict[str, float] = {}

    def total(comp: str) -> float:
        if comp in memo:
            return memo[comp]
        memo[comp] = 0.0   # guards against cycles
        out = 0.0
        for name in module.order.get(comp, []):
            inst = module.instructions[name]
            out += instruction_bytes(module, name)
            if inst.opcode == "while":
                body = re.search(r"body=%?([\w.\-]+)", inst.rest)
                cond = re.search(r"condition=%?([\w.\-]+)", inst.rest)
                trip = re.search(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"?(\d+)', inst.rest)
                op_name = re.search(r'op_name="([^"]*)"', inst.rest)
                times, _ = loop_trips(module, body.group(1), cond.group(1) if cond else "",
                                      inst.operands[0] if inst.operands else "",
                                      int(trip.group(1)) if trip else None, op_name.group(1) if op_name else "",
                                      run_time_trips)
                out += times * (total(body.group(1)) + (total(cond.group(1)) if cond else 0.0))
            elif inst.opcode == "conditional":
                branches = re.search(r"branch_computations=\{([^}]*)\}", inst.rest)
                names = re.findall(r"%?([\w.\-]+)", branches.group(1)) if branches else []
                out += max((total(n) for n in names), default=0.0)
            elif inst.opcode in ("call", "async-start"):
                callee = re.search(r"(?:to_apply|calls)=%?([\w.\-]+)", inst.rest)
                out += total(callee.group(1)) if callee else 0.0
        memo[comp] = out
        return out

    return total(entry) if entry is not None else 0.0
