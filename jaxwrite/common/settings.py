"""Typed settings: a recipe section as a frozen dataclass, every field documented and checked once.

    @settings_class
    class OptimizerConfig(Settings):
        SECTION = "optimizer"
        learning_rate: float = setting(3e-4, "peak learning rate", above=0)
        warmup_steps: int = setting(10, "steps of linear warm-up from 0 to the peak", min=0)

A field is one line: its type (the annotation), its default, what it means, and its bounds or choices.
Building an instance (directly, or `from_mapping` on a recipe's ml-collections section) converts and
checks every field in `__post_init__`: a list becomes a tuple, an int given for a float becomes a float,
a nested section becomes its class. A value of the wrong type or out of range, and a key the class does
not have, are a one-line InputError naming `SECTION.field` and what was expected, e.g.
`field 'rl.group_size': expected a positive integer, got 0`. Cross-field checks go in the subclass's
`__post_init__` after `super().__post_init__()`.

Recipes stay ml-collections files: `to_config_dict()` of an instance holding the defaults is what a
recipe starts from, so each default is written once, here, and `--config.KEY=VALUE` overrides find
every key typed by its default.
"""
from __future__ import annotations

import collections.abc
import dataclasses
import difflib
import functools
import types
import typing
from typing import Any, ClassVar, Mapping

import ml_collections

from jaxwrite.common.errors import InputError

MISSING = dataclasses.MISSING


def setting(default: Any = MISSING, doc: str = "", *, factory: Any = MISSING, min: float | None = None,
            max: float | None = None, above: float | None = None, choices: Any = None) -> Any:
    """A documented, checked dataclass field. `min`/`max` are inclusive bounds and `above` an exclusive
    lower bound of a number (or of each number of a tuple); `choices` the allowed strings: a tuple, or a
    registry (anything with `names()` and `in`) looked up when an instance is built."""
    if not doc:
        raise ValueError("every setting is documented: pass doc=")
    meta = {"doc": doc, "min": min, "max": max, "above": above, "choices": choices}
    if factory is not MISSING:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def closest(name: str, known) -> str:
    """' (did you mean 'x'?)' for the nearest known name, or ''."""
    match = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean '{match[0]}'?)" if match else ""


class _Mismatch(Exception):
    """A value that is not of the expected type."""


class _EntryError(Exception):
    """A bad entry of a mapping field: (the entry's path below the field, what is wrong with it)."""


def _describe(tp) -> str:
    """What a type annotation accepts, in words."""
    if tp is bool:
        return "true or false"
    if tp is int:
        return "an integer"
    if tp is float:
        return "a number"
    if tp is str:
        return "a string"
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join("None" if a is type(None) else _describe(a) for a in args)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a tuple of {_plural(args[0])}"
        return f"a tuple of {len(args)} ({', '.join(_describe(a) for a in args)})"
    if isinstance(tp, type) and issubclass(tp, Settings):
        return "a section (a ConfigDict of settings)"
    return f"a {getattr(tp, '__name__', tp)}"


def _plural(tp) -> str:
    return {int: "integers", float: "numbers", str: "strings", bool: "booleans"}.get(tp, _describe(tp))


def _convert(value: Any, tp: Any) -> Any:
    """`value` as type `tp` (lists -> tuples, ints -> floats, mappings -> sections), or _Mismatch."""
    if tp is Any:
        return value
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise _Mismatch
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _Mismatch
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise _Mismatch
    if tp is str:
        if isinstance(value, str):
            return value
        raise _Mismatch
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for alt in args:
            if alt is not type(None):
                try:
                    return _convert(value, alt)
                except _Mismatch:
                    pass
        raise _Mismatch
    if origin is tuple:
        if not isinstance(value, (tuple, list)):
            raise _Mismatch
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(v, args[0]) for v in value)
        if len(value) != len(args):
            raise _Mismatch
        return tuple(_convert(v, a) for v, a in zip(value, args))
    if origin in (collections.abc.Mapping, dict):
        if not isinstance(value, Mapping) and not isinstance(value, ml_collections.ConfigDict):
            raise _Mismatch
        key_tp, value_tp = args or (Any, Any)
        out = {}
        for k, v in value.items():
            try:
                out[_convert(k, key_tp)] = _convert(v, value_tp)
            except _Mismatch:
                raise _EntryError(str(k), f"expected {_describe(value_tp)}, got {v!r}") from None
            except InputError as err:   # an entry that is a section: its field below this entry
                raise _EntryError(f"{k}.{err.field}" if err.field else str(k), err.message) from None
            except _EntryError as err:
                raise _EntryError(f"{k}.{err.args[0]}", err.args[1]) from None
        return types.MappingProxyType(out)
    if isinstance(tp, type) and issubclass(tp, Settings):
        if isinstance(value, tp):
            return value
        if isinstance(value, (Mapping, ml_collections.ConfigDict)):
            return tp.from_mapping(value)
        raise _Mismatch
    if tp is ml_collections.FrozenConfigDict:
        if isinstance(value, tp):
            return value
        if isinstance(value, (Mapping, ml_collections.ConfigDict)):
            return tp(value)
        raise _Mismatch
    if isinstance(tp, type) and isinstance(value, tp):
        return value
    raise _Mismatch


def _numbers(value: Any):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [value]
    if isinstance(value, tuple):
        return [v for v in value if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return []


def _bounds_text(tp, meta) -> str:
    """'a positive integer', 'a number in [0, 1]', ... for a field's bounds."""
    lo, hi, above = meta["min"], meta["max"], meta["above"]
    if lo is None and hi is None and above is None:
        return _describe(tp)
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in args:
        inner = [a for a in args if a is not type(None)]
        return f"{_bounds_text(inner[0], meta) if len(inner) == 1 else _describe(tp)} or None"
    base = _describe(tp)
    whole = "integer" in base
    if lo == 1 and hi is None and whole:
        return base.replace("an integer", "a positive integer").replace("integers", "positive integers")
    if lo == 0 and hi is None and whole:
        return base.replace("an integer", "a non-negative integer").replace("integers", "non-negative integers")
    parts = []
    if above is not None:
        parts.append(f"> {above:g}")
    if lo is not None and hi is not None:
        return f"{base} in [{lo:g}, {hi:g}]"
    if lo is not None:
        parts.append(f">= {lo:g}")
    if hi is not None:
        parts.append(f"<= {hi:g}")
    return f"{base} {' and '.join(parts)}"


def _choices(choices) -> list[str]:
    return list(choices.names()) if hasattr(choices, "names") else list(choices)


def settings_class(cls):
    """Makes `cls` (a Settings subclass) a frozen, keyword-only dataclass and appends an `Attributes:`
    section to its docstring from the fields' docs, so `help(RLConfig)` lists every setting."""
    cls = dataclasses.dataclass(frozen=True, kw_only=True)(cls)
    lines = [f"        {f.name}: {f.metadata['doc']}" for f in dataclasses.fields(cls) if f.metadata.get("doc")]
    cls.__doc__ = (cls.__doc__ or cls.__name__).rstrip() + "\n\n    Attributes:\n" + "\n".join(lines)
    return cls


@functools.cache
def _hints(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@dataclasses.dataclass(frozen=True)
class Settings:
    """Base of every typed settings section (see the module docstring)."""
    SECTION: ClassVar[str] = ""       # the recipe path of the section ("rl", "rl.length_task"; "" = the top)

    def __post_init__(self):
        hints = _hints(type(self))
        for f in dataclasses.fields(self):
            value, tp, meta = getattr(self, f.name), hints[f.name], f.metadata
            try:
                converted = _convert(value, tp)
            except _Mismatch:
                raise InputError(f"expected {_bounds_text(tp, meta) if meta else _describe(tp)}, got {value!r}",
                                 field=self.field_path(f.name)) from None
            except _EntryError as err:
                raise InputError(err.args[1], field=f"{self.field_path(f.name)}.{err.args[0]}") from None
            if converted is not value:
                object.__setattr__(self, f.name, converted)
            if meta:
                self._check_bounds(f.name, converted, tp, meta)

    def _check_bounds(self, name: str, value: Any, tp, meta) -> None:
        lo, hi, above, choices = meta["min"], meta["max"], meta["above"], meta["choices"]
        for number in _numbers(value):
            if ((lo is not None and number < lo) or (hi is not None and number > hi)
                    or (above is not None and number <= above)):
                raise InputError(f"expected {_bounds_text(tp, meta)}, got {value!r}", field=self.field_path(name))
        if choices is not None:
            names = value if isinstance(value, tuple) else (value,)
            for item in names:
                if item is not None and item not in choices:
                    known, what = _choices(choices), getattr(choices, "kind", "value")
                    raise InputError(f"unknown {what} '{item}'{closest(str(item), known)}; expected one of: "
                                     f"{', '.join(known)}", field=self.field_path(name))

    @classmethod
    def field_path(cls, name: str) -> str:
        """`SECTION.name`, as the recipe (and `--config.`) spells the field."""
        return f"{cls.SECTION}.{name}" if cls.SECTION else name

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | ml_collections.ConfigDict):
        """An instance from a recipe section (a ConfigDict or a dict): unknown and missing keys are refused."""
        if isinstance(values, ml_collections.ConfigDict):
            values = values.to_dict()   # resolves the recipe's field references (num_steps from epochs)
        names = [f.name for f in dataclasses.fields(cls) if f.init]
        for key in values:
            if key not in names:
                raise InputError(f"unknown key{closest(key, names)}; {cls.SECTION or 'the config'} has: "
                                 f"{', '.join(sorted(names))}", field=cls.field_path(key))
        for f in dataclasses.fields(cls):
            if f.init and f.name not in values and f.default is MISSING and f.default_factory is MISSING:
                raise InputError(f"missing; expected {_describe(_hints(cls)[f.name])} ({f.metadata.get('doc', '')})",
                                 field=cls.field_path(f.name))
        return cls(**values)

    def replace(self, **changes):
        """A copy with `changes`, checked again."""
        return dataclasses.replace(self, **changes)

    def updated(self, changes: Mapping[str, Any]):
        """A copy with dotted-path changes (`{"tokenizer.path": p, "rl.rm_path": q}`), checked again."""
        direct, nested = {}, {}
        for key, value in changes.items():
            head, _, rest = key.partition(".")
            if rest:
                nested.setdefault(head, {})[rest] = value
            else:
                direct[head] = value
        for head, sub in nested.items():
            child = getattr(self, head)
            if isinstance(child, Settings):
                direct[head] = child.updated(sub)
            elif isinstance(child, ml_collections.FrozenConfigDict):
                unknown = [k for k in sub if "." in k or k not in child]
                if unknown:
                    raise InputError(f"unknown key{closest(unknown[0], child.keys())}",
                                     field=self.field_path(f"{head}.{unknown[0]}"))
                direct[head] = ml_collections.FrozenConfigDict({**child.to_dict(), **sub})
            else:
                raise InputError("not a section", field=self.field_path(head))
        return self.replace(**direct)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dicts (the form written to run_config.json and given to trackers)."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def to_config_dict(self) -> ml_collections.ConfigDict:
        """The section as a recipe holds it: what `--config.KEY=VALUE` overrides apply to."""
        return ml_collections.ConfigDict(self.to_dict())

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """{field: default} of every field that has one (sections as plain dicts)."""
        out = {}
        for f in dataclasses.fields(cls):
            if f.default is not MISSING:
                out[f.name] = _plain(f.default)
            elif f.default_factory is not MISSING:
                out[f.name] = _plain(f.default_factory())
        return out

    @classmethod
    def documentation(cls) -> dict[str, str]:
        """{field: its doc}: what `Attributes:` of a docstring would say, read from the fields."""
        return {f.name: f.metadata.get("doc", "") for f in dataclasses.fields(cls)}


def _plain(value: Any) -> Any:
    if isinstance(value, Settings):
        return value.to_dict()
    if isinstance(value, ml_collections.FrozenConfigDict):
        return value.to_dict()
    if isinstance(value, ml_collections.ConfigDict):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value
