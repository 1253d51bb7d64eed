"""The code before issue 17, for benchmarks that run it beside the current code in the same run.

`legacy(names)` reads `jaxwrite/infer/<name>.py` for each name from git at LEGACY_COMMIT (the tree the
issue measured) into a temporary package `jaxwrite_legacy`, pointing their imports of each other at
that package (everything else still comes from the current jaxwrite), and imports it. Nothing is
vendored: the old files exist only in git history.
"""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tempfile

LEGACY_COMMIT = "370569e"   # issue 17 was filed against this tree (standard-library server, old DFA)
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def legacy(names: list[str]):
    """The package `jaxwrite_legacy` holding the old versions of jaxwrite/infer/<name>.py."""
    root = tempfile.mkdtemp(prefix="jaxwrite_legacy_")
    package = os.path.join(root, "jaxwrite_legacy")
    os.makedirs(package)
    open(os.path.join(package, "__init__.py"), "w").close()
    for name in names:
        source = subprocess.run(["git", "-C", _REPO, "show", f"{LEGACY_COMMIT}:jaxwrite/infer/{name}.py"],
                                check=True, capture_output=True, text=True).stdout
        for other in names:
            source = source.replace(f"jaxwrite.infer.{other} ", f"jaxwrite_legacy.{other} ")
        with open(os.path.join(package, f"{name}.py"), "w") as f:
            f.write(source)
    sys.path.insert(0, root)
    package = importlib.import_module("jaxwrite_legacy")
    for name in names:
        importlib.import_module(f"jaxwrite_legacy.{name}")
    return package
