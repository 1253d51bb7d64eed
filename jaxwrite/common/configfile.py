"""Recipe configs: a Python file with `get_config()` returning an ml_collections ConfigDict,
overridden from the command line as `--config.model.num_layers=2`.

A config is named by a path (`configs/grpo_tiny.py`, `my_recipe.py:v5p-128`) or by the name of a
recipe that ships with the package (`grpo_tiny`, `rm_qwen2.5_72b:v5p-128`). The repository's
`configs/` folder is installed as the package `jaxwrite.recipes` (setup.py's package_dir), so a
non-editable install finds the same recipes a checkout browses.
"""
from __future__ import annotations

import ast
import importlib.resources
import importlib.util
import inspect
import os
import sys

import ml_collections

from jaxwrite.common.errors import InputError
from jaxwrite.common.settings import closest


def load_config(path: str | os.PathLike, overrides: list[str] | tuple[str, ...] = ()) -> ml_collections.ConfigDict:
    """Imports `path`, calls its `get_config()` and applies `--config.KEY=VALUE` overrides.

    `path` may be `file.py` or `file.py:arg` (the arg is passed to `get_config`, as absl does; a
    recipe whose get_config takes no argument refuses one in one line).
    """
    path, arg = resolve_recipe(path)
    name = "jaxwrite_config_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as err:   # the user's recipe file: one line naming where, not a traceback
        raise InputError(f"syntax error: {err.msg}", path=path, line=err.lineno) from None
    except ImportError as err:
        raise InputError(f"the config imports something missing ({err})", path=path) from None
    except Exception as err:   # the recipe's own code: its file:line and message (the CLI's --debug: traceback)
        raise _recipe_error(err, path) from err
    if not hasattr(module, "get_config"):
        raise InputError("expected a function get_config()", path=path)
    if arg is not None and not _takes_argument(module.get_config):
        raise InputError(f"this recipe's get_config() takes no target, so ':{arg}' cannot be applied; "
                         "name the file without it (and pick the slice with --topology or --config.mesh)",
                         path=path)
    try:
        cfg = module.get_config(arg) if arg is not None else module.get_config()
    except InputError:
        raise
    except Exception as err:
        raise _recipe_error(err, path) from err
    if not isinstance(cfg, ml_collections.ConfigDict):
        raise InputError(f"get_config() returned a {type(cfg).__name__}; expected an ml_collections.ConfigDict",
                         path=path)
    apply_overrides(cfg, overrides)
    return cfg


def _recipe_error(err: BaseException, path: str) -> InputError:
    """One line at the recipe's own file:line (its innermost frame in the traceback) and the message."""
    import traceback
    here = os.path.realpath(path)
    lines = [f.lineno for f in traceback.extract_tb(err.__traceback__) if os.path.realpath(f.filename) == here]
    what = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
    return InputError(f"the recipe raised {what}", path=path, line=lines[-1] if lines else None)


def _takes_argument(fn) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):   # no signature to read (a builtin): let the call decide
        return True
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params)


RECIPES_PACKAGE = "jaxwrite.recipes"


def recipes_dir() -> str:
    """The folder of the shipped recipes: the installed `jaxwrite.recipes`, or, when jaxwrite runs
    from a checkout that was never installed, the checkout's `configs/`."""
    try:
        return str(importlib.resources.files(RECIPES_PACKAGE))
    except ModuleNotFoundError:
        import jaxwrite
        return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(jaxwrite.__file__))), "configs")


def recipe_names() -> list[str]:
    """Names accepted by `--config NAME`: one per shipped recipe file."""
    folder = recipes_dir()
    return sorted(f[:-3] for f in os.listdir(folder) if f.endswith(".py") and not f.startswith("_"))


def resolve_recipe(spec: str | os.PathLike) -> tuple[str, str | None]:
    """(file path, get_config argument or None) for a path or a shipped recipe's name.

    Tried in order: the path as given (from the cwd); then, for `NAME`, `NAME.py` or
    `configs/NAME.py`, the shipped recipe NAME. A `:arg` tail is split off when the whole string is
    not itself a file (as absl's config flags do)."""
    spec = os.fspath(spec)
    arg = None
    if ":" in spec and not os.path.exists(spec):
        spec, arg = spec.rsplit(":", 1)
    if os.path.exists(spec):
        return spec, arg
    head, base = os.path.split(spec)
    name = base[:-3] if base.endswith(".py") else base
    if head in ("", "configs") and name:
        shipped = os.path.join(recipes_dir(), name + ".py")
        if os.path.isfile(shipped):
            return shipped, arg
    raise InputError("config file not found; expected a recipe file or a shipped recipe name "
                     f"({', '.join(recipe_names())})", path=spec)


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
        if isinstance(old, ml_collections.ConfigDict):
            raise InputError(f"a group cannot be set whole; set its keys ({', '.join(sorted(old.keys()))})",
                             field=key)
        try:
            try:
                parent[leaf] = _coerce(raw, old)
            except TypeError:   # ConfigDict keeps a field's type: (1, 2) for a tuple, not 3
                raise _Expected(f"a {type(old).__name__} like {old!r}") from None
        except _Expected as err:
            raise InputError(f"expected {err}, got {raw!r} (--config.{key}={raw})", field=key) from None


def _walk(cfg, key: str, item: str):
    parts = key.split(".")
    node = cfg
    for i, part in enumerate(parts):
        if not isinstance(node, (ml_collections.ConfigDict, dict)) or part not in node:
            known = sorted(node.keys()) if hasattr(node, "keys") else []
            where = ".".join(parts[:i]) or "config"
            raise InputError(f"unknown config key '{key}' in override '{item}'{closest(part, known)}; "
                             f"{where} has: {', '.join(known) or '(not a group)'}")
        if i == len(parts) - 1:
            return node, part
        node = node[part]


class _Expected(ValueError):
    """An override value that does not fit its field; the message says what was expected."""


def _coerce(raw: str, old):
    if isinstance(old, bool):
        low = raw.lower()
        if low in ("true", "1", "yes"):
            return True
        if low in ("false", "0", "no"):
            return False
        raise _Expected("true or false")
    if isinstance(old, (int, float)) and not isinstance(old, bool):
        what = "an integer" if isinstance(old, int) else "a number"
        try:
            val = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            raise _Expected(what) from None
        if not isinstance(val, (int, float)) or isinstance(val, bool):
            raise _Expected(what)
        if isinstance(old, int) and isinstance(val, float) and not val.is_integer():
            raise _Expected(what)
        return type(old)(val)
    if isinstance(old, str):
        return raw
    if isinstance(old, (tuple, list)) or old is None:
        try:
            val = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            if old is None:
                return raw
            raise _Expected("a Python literal like (1, 2)") from None
        if isinstance(old, tuple) and isinstance(val, list):
            val = tuple(val)
        return val
    raise _Expected(f"nothing: a {type(old).__name__} field cannot be overridden")
