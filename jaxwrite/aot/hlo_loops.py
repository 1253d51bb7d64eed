"""Trip counts of the while loops of an optimised HLO module, read from the loop's own instructions.

XLA's TPU pipeline keeps no `known_trip_count` on most loops (a scan over layers or microbatches, the
windowed all-gather / reduce-scatter matmuls of FSDP), but each is a counted loop: its condition is
`counter < N` (or `N > counter`) on one element of the loop tuple, the body adds a constant step to
that element, and the while's initial tuple gives its start. So trips = ceil((N - start) / step), with
each of N, start and step a constant reached through copies and bitcasts; N may also sit in the loop
tuple (a hoisted loop invariant) with a constant initial value. A loop whose bound is computed at run
time (attention over the filled part of a KV cache) has no static trip count: None.
"""
from __future__ import annotations

import dataclasses
import re

_INDEX = re.compile(r"index=(\d+)")
_DIRECTION = re.compile(r"direction=(LT|LE|GT|GE)")
_VALUE = re.compile(r"^\s*(-?\d+)\)")
_PASS_THROUGH = ("copy", "bitcast", "convert")


@dataclasses.dataclass(frozen=True)
class Instruction:
    opcode: str
    operands: tuple[str, ...]
    rest: str                     # the text after "opcode(": operands, then attributes


@dataclasses.dataclass
class Module:
    """What trip counts (and jaxwrite.aot.hlo_bytes) need of a module: every instruction by its
    (module-unique) name with its shape text, each computation's instructions in order, its first
    parameter, its parameters by index and its root."""
    instructions: dict[str, Instruction] = dataclasses.field(default_factory=dict)
    params: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    roots: dict[str, str] = dataclasses.field(default_factory=dict)
    shapes: dict[str, str] = dataclasses.field(default_factory=dict)
    order: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    param_index: dict[str, dict[int, str]] = dataclasses.field(default_factory=dict)

    def source(self, name: str) -> str:
        """`name`, or the value it copies."""
        while name in self.instructions and self.instructions[name].opcode in _PASS_THROUGH:
            name = self.instructions[name].operands[0]
        return name

    def constant(self, name: str) -> int | None:
        inst = self.instructions.get(self.source(name))
        if inst is None or inst.opcode != "constant":
            return None
        value = _VALUE.match(inst.rest)
        return int(value.group(1)) if value else None

    def tuple_index(self, name: str, computation: str) -> int | None:
        """i when `name` is element i of `computation`'s (tuple) parameter."""
        inst = self.instructions.get(self.source(name))
        params = self.params.get(computation, [])
        if inst is None or inst.opcode != "get-tuple-element" or not params or inst.operands[0] != params[0]:
            return None
        index = _INDEX.search(inst.rest)
        return int(index.group(1)) if index else None

    def element(self, tuple_name: str, index: int) -> str | None:
        inst = self.instructions.get(self.source(tuple_name))
        if inst is None or inst.opcode != "tuple" or index >= len(inst.operands):
            return None
        return inst.operands[index]


def trip_count(module: Module, condition: str, body: str, init: str) -> int | None:
    """Trips of `while(init), condition=..., body=...`, None where they are not static."""
    root = module.instructions.get(module.roots.get(condition, ""))
    if root is None or root.opcode != "compare" or len(root.operands) != 2:
        return None
    direction = _DIRECTION.search(root.rest)
    if direction is None:
        return None
    counter, bound = root.operands
    op = direction.group(1)
    if op in ("GT", "GE"):   # N > i is i < N
        counter, bound, op = bound, counter, {"GT": "LT", "GE": "LE"}[op]
    index = module.tuple_index(counter, condition)
    if index is None:
        return None
    limit = module.constant(bound)
    if limit is None:   # a bound carried in the loop tuple: static if its initial value is
        carried = module.tuple_index(bound, condition)
        element = module.element(init, carried) if carried is not None else None
        limit = module.constant(element) if element is not None else None
    start_name = module.element(init, index)
    start = module.constant(start_name) if start_name is not None else None
    step = _step(module, body, index)
    if limit is None or start is None or not step or step < 0:
        return None
    span = limit - start + (1 if op == "LE" else 0)
    return max(0, -(-span // step))


def _step(module: Module, body: str, index: int) -> int | None:
    """The constant the body adds to element `index` of the loop tuple."""
    root = module.roots.get(body)
    update = module.element(root, index) if root else None
    inst = module.instructions.get(module.source(update)) if update else None
    if inst is None or inst.opcode != "add" or len(inst.operands) != 2:
        return None
    for a, b in (inst.operands, inst.operands[::-1]):
        if module.tuple_index(a, body) == index:
            return module.constant(b)
    return None
