"""Recipe configs: a Python file with `get_config()` returning an ml_collections ConfigDict,
overridden from the command line as `--config.model.num_layers=2`."""
from __future__ import annotations

import ast
import importlib.util
import os
import sys

import ml_collections

from jaxwrite.common.errors import InputError


def load_config(path: str | os.PathLike, overrides: list[str] | tuple[str, ...] = ()) -> ml_collections.ConfigDict:
    """Imports `path`, calls its `get_config()` and applies `--config.KEY=VALUE` overrides.

    `path` may be `file.py` or `file.py:arg` (the arg is passed to `get_config`, as absl does).
    """
    path = os.fspath(path)
    arg = None
    if ":" in path and not os.path.exists(path):
        path, arg = path.rsplit(":", 1)
    if not os.path.exists(path):
        raise InputError("config file not found", path=path)
    name = "jaxwrite_config_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    if not hasattr(module, "get_config"):
        raise InputError("expected a function get_config()", path=path)
    cfg = module.get_config(arg) if arg is not None else module.get_config()
    apply_overrides(cfg, overrides)
    return cfg


def apply_overrides(cfg: ml_collections.ConfigDict, overrides) -> None:
    """Applies `--config.a.b=value` (or `a.b=value`) strings, typed by the existing field."""
    for item in overrides:
        text = item[2:] if item.startswith("--") else item
        if text.startswith("config."):
            text = text[len("config."):]
        if "=" not in text:
            raise InputError(f"override '{item}': expected --config.KEY=VALUE")
        key, raw = text.split("=", 1)
        parent, leaf = _walk(cfg, key, item)
        old = parent[leaf]
        parent[leaf] = _coerce(raw, old, item)


def _walk(cfg, key: str, item: str):
    parts = key.split(".")
    node = cfg
    for i, part in enumerate(parts):
        if not isinstance(node, (ml_collections.ConfigDict, dict)) or part not in node:
            known = ", ".join(sorted(node.keys())) if hasattr(node, "keys") else "(not a group)"
            where = ".".join(parts[:i]) or "config"
            raise InputError(f"unknown config key '{key}' in override '{item}'; "
                             f"{where} has: {known}")
        if i == len(parts) - 1:
            return node, part
        node = node[part]


def _coerce(raw: str, old, item: str):
    if isinstance(old, bool):
        low = raw.lower()
        if low in ("true", "1", "yes"):
            return True
        if low in ("false", "0", "no"):
            return False
        raise InputError(f"override '{item}': expected true or false")
    if isinstance(old, (int, float)) and not isinstance(old, bool):
        try:
            val = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            raise InputError(f"override '{item}': expected a number") from None
        if isinstance(old, int) and isinstance(val, float) and not val.is_integer():
            raise InputError(f"override '{item}': expected an integer")
        return type(old)(val)
    if isinstance(old, str):
        return raw
    if isinstance(old, (tuple, list)) or old is None:
        try:
            val = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            if old is None:
                return raw
            raise InputError(f"override '{item}': expected a Python literal like (1, 2)") from None
        if isinstance(old, tuple) and isinstance(val, list):
            val = tuple(val)
        return val
    raise InputError(f"override '{item}': cannot override a {type(old).__name__} field")
