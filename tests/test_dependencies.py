"""Declared dependencies: every package the library imports is declared in setup.py, every range has a
lower and an upper bound, .ci/lower-bounds.txt pins exactly the lower bounds (what CI installs), and the
installed versions sit inside the declared ranges."""
import ast
import importlib.metadata
import os
import re
import sys

import pytest

from source_imports import source_imports

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIRST_PARTY = {"jaxwrite", "data_pipelines"}
# Import names whose distribution may not be installed here (optional extras): where to find them.
NOT_INSTALLED = {"wandb": "wandb", "seqio": "seqio", "tensorflow": "tensorflow-cpu", "gcsfs": "gcsfs"}
# An import name several distributions provide (the CPU and full TensorFlow builds).
ALIASES = {"tensorflow": {"tensorflow", "tensorflow-cpu"}}
# Modules that exist only for an extra, so they may import it at the top.
OPTIONAL_MODULES = {os.path.join("data_pipelines", "seqio_tasks.py")}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _setup_lists() -> tuple[list[str], dict[str, list[str]]]:
    tree = ast.parse(open(os.path.join(REPO, "setup.py"), encoding="utf-8").read())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ("CORE", "EXTRAS"):
                found[node.targets[0].id] = ast.literal_eval(node.value)
    return found["CORE"], found["EXTRAS"]


def _parse(requirement: str) -> tuple[str, dict[str, str]]:
    """(normalised name, {operator: version}) of a requirement like `etils[epath]>=1.15.0,<2`."""
    match = re.fullmatch(r"([A-Za-z0-9._-]+)(\[[^\]]*\])?\s*(.*)", requirement.strip())
    assert match, requirement
    specs = {}
    for part in filter(None, (p.strip() for p in match.group(3).split(","))):
        op, version = re.fullmatch(r"(==|>=|<=|<|>|~=|!=)\s*(\S+)", part).groups()
        specs[op] = version
    return _norm(match.group(1)), specs


def _imports() -> list[tuple[str, str, bool]]:
    """(top-level module, file, at module level) for every absolute import in the library's code."""
    return [(i.module.split(".")[0], i.path, i.module_level)
            for i in source_imports("jaxwrite", "data_pipelines", "configs")]


def _distributions(module: str) -> set[str]:
    provided = importlib.metadata.packages_distributions().get(module)
    if provided:
        return {_norm(d) for d in provided} | ALIASES.get(module, set())
    assert module in NOT_INSTALLED, f"{module} is imported but neither installed nor known as an optional extra"
    return {_norm(NOT_INSTALLED[module])} | ALIASES.get(module, set())


def test_every_imported_package_is_declared():
    core, extras = _setup_lists()
    core_names = {_parse(r)[0] for r in core}
    extra_names = {_parse(r)[0] for reqs in extras.values() for r in reqs}
    stdlib = set(sys.stdlib_module_names)
    problems = []
    for module, path, module_level in _imports():
        if module in FIRST_PARTY or module in stdlib or module == "__future__":
            continue
        dists = _distributions(module)
        if dists & core_names:
            continue
        if not dists & extra_names:
            problems.append(f"{path}: imports {module} ({', '.join(sorted(dists))}), not declared in setup.py")
        elif module_level and path not in OPTIONAL_MODULES:
            problems.append(f"{path}: imports the optional {module} at module level (import it where it is used)")
    assert not problems, "\n".join(sorted(set(problems)))


def test_every_range_has_both_bounds():
    core, extras = _setup_lists()
    for requirement in core + extras["test"]:
        name, specs = _parse(requirement)
        if "==" in specs:   # an exact pin, kept only where a local build is meant (torch CPU)
            assert name == "torch", requirement
            continue
        assert ">=" in specs and "<" in specs, f"{requirement}: expected a >=LOW,<HIGH range"


def _lower_bounds() -> dict[str, str]:
    pins = {}
    for line in open(os.path.join(REPO, ".ci", "lower-bounds.txt"), encoding="utf-8"):
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[_norm(name)] = version.strip()
    return pins


def test_lower_bounds_file_pins_the_declared_lower_bounds():
    core, extras = _setup_lists()
    declared = {}
    for requirement in core + extras["test"]:
        name, specs = _parse(requirement)
        declared[name] = specs.get(">=") or specs["=="]
    assert _lower_bounds() == declared


def _version_tuple(version: str) -> tuple:
    # "2.13.0+cpu" -> (2, 13, 0): release numbers only, enough to compare against the declared bounds.
    return tuple(int(x) for x in re.match(r"\d+(\.\d+)*", version).group(0).split("."))


@pytest.mark.parametrize("requirement", _setup_lists()[0])
def test_installed_version_is_inside_the_declared_range(requirement):
    name, specs = _parse(requirement)
    installed = _version_tuple(importlib.metadata.version(name))
    if ">=" in specs:
        assert installed >= _version_tuple(specs[">="]), (requirement, installed)
    if "<" in specs:
        assert installed < _version_tuple(specs["<"]), (requirement, installed)
