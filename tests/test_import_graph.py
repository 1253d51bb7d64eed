"""The architecture page's dependency arrows are the import graph: every import between jaxwrite's packages
(and data_pipelines) must follow an arrow docs/architecture.md states, directly or through a chain of them."""
import os
import re

from source_imports import source_imports

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARCHITECTURE = os.path.join("docs", "architecture.md")   # the module map and its arrows


def _paragraph(path: str, start: str) -> str:
    text = open(os.path.join(REPO, path), encoding="utf-8").read()
    paragraph = text[text.index(start):]
    return paragraph[:paragraph.index("\n\n")] if "\n\n" in paragraph else paragraph


def _stated_arrows(paragraph: str | None = None) -> dict[str, set[str]]:
    """{package: packages it may import directly} from docs/architecture.md's `a, b -> c -> d` chains."""
    if paragraph is None:
        paragraph = _paragraph(ARCHITECTURE, "Dependencies point one way")
    packages = _packages()
    arrows: dict[str, set[str]] = {p: set() for p in packages}
    # "everything `-> text -> common`": any package may import the chain's first package.
    for chain in re.findall(r"`([^`]*->[^`]*)`", paragraph):
        groups = [[name.strip() for name in part.split(",") if name.strip()] for part in chain.split("->")]
        if not groups[0]:
            before = paragraph[:paragraph.index(chain)]
            assert before.rstrip(" `").endswith("everything"), chain
            groups[0] = sorted(packages - {name for group in groups for name in group})
        for src, dst in zip(groups, groups[1:]):
            for a in src:
                for b in dst:
                    assert a in packages and b in packages, f"docs/architecture.md names no such package: {a} or {b}"
                    if a != b:
                        arrows[a].add(b)
    return arrows


def _packages() -> set[str]:
    pkg = os.path.join(REPO, "jaxwrite")
    names = {d for d in os.listdir(pkg) if os.path.isfile(os.path.join(pkg, d, "__init__.py"))}
    return names | {"data_pipelines"}


def _closure(arrows: dict[str, set[str]]) -> dict[str, set[str]]:
    reach = {}
    for start in arrows:
        seen, todo = set(), list(arrows[start])
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(arrows[node])
        reach[start] = seen
    return reach


def _imports() -> list[tuple[str, str, str]]:
    """(importing package, imported package, file:line) for every import in library code, including
    imports deferred inside functions."""
    found = []
    for imp in source_imports("jaxwrite", "data_pipelines"):
        rel = imp.path.split(os.sep)
        if rel[0] == "jaxwrite" and len(rel) == 2:
            continue   # jaxwrite/__init__.py, __main__.py: the entry point above every package
        src = rel[1] if rel[0] == "jaxwrite" else "data_pipelines"
        parts = imp.module.split(".")
        dst = (parts[1] if parts[0] == "jaxwrite" and len(parts) > 1
               else "data_pipelines" if parts[0] == "data_pipelines" else None)
        if dst and dst != src:
            found.append((src, dst, f"{imp.path}:{imp.line}"))
    return found


def test_every_import_follows_a_stated_arrow():
    reach = _closure(_stated_arrows())
    bad = [f"{where}: {src} imports {dst}" for src, dst, where in _imports() if dst not in reach[src]]
    assert not bad, "imports against docs/architecture.md's arrows:\n" + "\n".join(bad)


def test_the_stated_arrows_have_no_cycle():
    reach = _closure(_stated_arrows())
    assert not [p for p in reach if p in reach[p]]


def test_every_package_is_in_the_map():
    page = open(os.path.join(REPO, ARCHITECTURE), encoding="utf-8").read()
    arrows = _stated_arrows()
    named = set(arrows) - {p for p in arrows if not arrows[p] and not any(p in v for v in arrows.values())}
    assert named == _packages(), f"packages missing from the architecture page's arrows: {_packages() - named}"
    for package in _packages() - {"data_pipelines"}:
        assert f"  {package}/" in page, f"the module map in {ARCHITECTURE} lacks jaxwrite/{package}/"


def test_the_package_docstring_states_the_same_arrows():
    docstring = _paragraph(os.path.join("jaxwrite", "__init__.py"), "Packages, dependencies")
    assert _stated_arrows(docstring) == _stated_arrows()
