"""Every absolute import in the repository's Python sources, for the tests that check imports against a
rule (declared dependencies, the README's package arrows). Deferred imports inside functions count."""
import ast
import os
import pathlib
from typing import Iterator, NamedTuple

REPO = pathlib.Path(__file__).resolve().parents[1]


class Import(NamedTuple):
    module: str          # dotted name as written: "jaxwrite.common", "numpy"
    path: str            # file, relative to the repository
    line: int
    module_level: bool   # False for an import inside a function or class body


def source_imports(*tops: str) -> Iterator[Import]:
    """The absolute imports of every .py file below the given top-level folders."""
    for top in tops:
        for folder, _, files in os.walk(REPO / top):
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(folder, name)
                tree = ast.parse(open(path, encoding="utf-8").read(), path)
                module_level = {id(n) for n in tree.body}
                for node in ast.walk(tree):
                    if isinstance(node, ast.Import):
                        names = [alias.name for alias in node.names]
                    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                        names = [node.module]
                    else:
                        continue
                    for module in names:
                        yield Import(module, os.path.relpath(path, REPO), node.lineno, id(node) in module_level)
