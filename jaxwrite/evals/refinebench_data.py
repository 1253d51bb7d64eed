"""RefineBench sample problems: load, validate and de-duplicate the two sample files, in memory.

The data is CC BY-NC-ND 4.0: files are read as they are and every transformed view (de-duplicated set,
prompt text with materials) is built at load time and never written back to disk.

The 109-item file (`refinebench_samples_109.json`, the website's current copy) wins over the 46-item
visualisation file when both hold an index; indices whose content differs between the two are reported
as `conflicts`. Materials come in three shapes across the files: a dict with `content`, a string
holding such a dict as a Python literal, or plain text. Passages (46-file only) go first, then
materials, then the question, as a third-party loader of the full data set does.
"""
from __future__ import annotations

import ast
import dataclasses
import json
import os

from jaxwrite.common import InputError

SAMPLE_FILES = ("refinebench_samples_109.json", "refinebench_samples_46_vis.json")  # preference order
EXAM_TYPES = ("Exact Match", "Free Form")


@dataclasses.dataclass(frozen=True)
class Problem:
    index: str
    field: str
    subject: str
    exam_type: str
    question: str
    checklist: tuple[str, ...]
    reference_answer: tuple[str, ...]  # shown to the checklist judge, never to the model under test
    context: tuple[str, ...]  # passages then materials, each as plain text
    source: str  # file the item came from


@dataclasses.dataclass(frozen=True)
class RefineBenchSet:
    problems: list[Problem]
    conflicts: list[str]  # indices in both files whose content differs (109-file version kept)


def load_refinebench(data_dir: str | os.PathLike) -> RefineBenchSet:
    """The sample files in `<data_dir>/refinebench/` (both in a full data root; jaxwrite's embedded sample
    ships one of them whole), de-duplicated by index, sorted by index."""
    folder = os.path.join(os.fspath(data_dir), "refinebench")
    present = [n for n in SAMPLE_FILES if os.path.exists(os.path.join(folder, n))]
    if not present:
        raise InputError(f"RefineBench sample files not found (expected {' or '.join(SAMPLE_FILES)}; "
                         "`jaxwrite data download --only refinebench` fetches them)", path=folder)
    chosen: dict[str, tuple[dict, Problem]] = {}
    conflicts = []
    for name in present:
        path = os.path.join(folder, name)
        for raw, problem in _read_file(path):
            if problem.index not in chosen:
                chosen[problem.index] = (raw, problem)
            elif chosen[problem.index][0] != raw:
                conflicts.append(problem.index)
    return RefineBenchSet(problems=[chosen[k][1] for k in sorted(chosen)], conflicts=sorted(conflicts))


def problem_prompt(problem: Problem) -> str:
    """The first user turn: context blocks (passages, materials) before the question."""
    return "\n\n".join([*problem.context, problem.question])


def _read_file(path: str):
    if not os.path.exists(path):
        raise InputError("RefineBench sample file not found (expected the shared data layout)", path=path)
    with open(path, encoding="utf-8") as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as e:
            raise InputError(f"invalid JSON ({e.msg})", path=path, line=e.lineno) from None
    if not isinstance(data, dict):
        raise InputError("expected a JSON object mapping field -> list of items", path=path)
    for domain, items in data.items():
        if not isinstance(items, list):
            raise InputError("expected a list of items", path=path, field=domain)
        for i, raw in enumerate(items):
            yield raw, _problem(raw, path, f"{domain}[{i}]")


def _problem(raw, path: str, where: str) -> Problem:
    def need(key: str, kind, nonempty: bool = True):
        value = raw.get(key)
        if not isinstance(value, kind) or (nonempty and not value):
            what = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise InputError(f"expected a non-empty {what}", path=path, field=f"{where}.{key}")
        return value

    if not isinstance(raw, dict):
        raise InputError("expected an object", path=path, field=where)
    checklist = need("checklist", list)
    if not all(isinstance(c, str) and c.strip() for c in checklist):
        raise InputError("expected a list of non-empty strings", path=path, field=f"{where}.checklist")
    exam_type = need("exam_type", str)
    if exam_type not in EXAM_TYPES:
        raise InputError(f"expected one of {EXAM_TYPES}, found {exam_type!r}", path=path,
                         field=f"{where}.exam_type")
    reference = need("reference_answer", list, nonempty=False)
    passages = raw.get("passages", [])
    if not isinstance(passages, list) or not all(isinstance(p, str) for p in passages):
        raise InputError("expected a list of strings", path=path, field=f"{where}.passages")
    materials = need("materials", (list, str), nonempty=False)
    materials = [materials] if isinstance(materials, str) else materials
    context = [*passages, *(_material_text(m, path, f"{where}.materials[{k}]") for k, m in enumerate(materials))]
    return Problem(index=need("index", str), field=need("field", str), subject=str(raw.get("subject", "")),
                   exam_type=exam_type, question=need("question", str), checklist=tuple(checklist),
                   reference_answer=tuple(str(r) for r in reference),
                   context=tuple(c for c in context if c.strip()), source=os.path.basename(path))


def _material_text(material, path: str, field: str) -> str:
    if isinstance(material, dict):
        content = material.get("content")
    elif isinstance(material, str) and material.lstrip().startswith("{"):
        try:  # the 109-file stores each material as the Python repr of {'content': ...}
            parsed = ast.literal_eval(material)
        except (ValueError, SyntaxError):
            parsed = None
        content = parsed.get("content") if isinstance(parsed, dict) else material
    else:
        content = material
    if not isinstance(content, str):
        raise InputError("expected text or an object with a 'content' string", path=path, field=field)
    return content
