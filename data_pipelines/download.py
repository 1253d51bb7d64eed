"""Fetch the official data sources at pinned commits into the data-root layout, with checksums.

Every file comes from `<base>/<repo>/<commit>/<path>` (base: raw.githubusercontent.com, or
$JAXWRITE_DOWNLOAD_BASE / `base_url` for mirrors and tests) and lands at `<output>/<dest>`, the
layout of the shared data root (writingbench/, longbench_write/, corpus_en/, ...). The manifest
(`download_manifest.json`) pins each file's SHA-256 where a trusted copy existed to take it from;
the rest are fetched "unchecked" and reported as such.

Two files of the layout are not upstream files but are derived, deterministically, from ones that are
("builds"): WritingBench's critic prompts (the `evaluate_system` / `evaluate_prompt` strings of
prompt.py, after `.strip()`) and `requirement_subsets.json` (the six requirement subset files,
compressed to indices and criterion names). Their inputs are kept under `<output>/.upstream/`.

Resumable: a file already present with the right checksum is skipped; a download is written to
`<dest>.part` and renamed only after its checksum matched, so an interrupted run leaves no bad file.
"""
from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import os
import pathlib
import urllib.error
import urllib.parse
import urllib.request
from typing import Callable, Iterable

from jaxwrite.common import InputError

DEFAULT_BASE = "https://raw.githubusercontent.com"
BASE_ENV = "JAXWRITE_DOWNLOAD_BASE"
MANIFEST_PATH = pathlib.Path(__file__).with_name("download_manifest.json")
_CHUNK = 1 << 20


class DownloadError(InputError):
    """A source that cannot be fetched or does not match its pinned checksum (one line, what to do)."""


@dataclasses.dataclass(frozen=True)
class SourceFile:
    repo: str
    commit: str
    path: str
    dest: str                   # relative to the output root
    sha256: str | None          # None: unchecked
    size: int | None

    def url(self, base: str) -> str:
        return f"{base.rstrip('/')}/{self.repo}/{self.commit}/{urllib.parse.quote(self.path)}"


@dataclasses.dataclass(frozen=True)
class Build:
    kind: str                                   # a name in BUILDERS
    inputs: tuple[SourceFile, ...]
    outputs: dict[str, str]                     # dest -> sha256


@dataclasses.dataclass(frozen=True)
class Dataset:
    name: str
    files: tuple[SourceFile, ...]
    builds: tuple[Build, ...]


@dataclasses.dataclass
class DownloadReport:
    fetched: list[str] = dataclasses.field(default_factory=list)
    skipped: list[str] = dataclasses.field(default_factory=list)    # present with the right checksum
    built: list[str] = dataclasses.field(default_factory=list)
    unchecked: list[str] = dataclasses.field(default_factory=list)  # fetched or kept without a pinned checksum


def load_manifest(path: str | os.PathLike = MANIFEST_PATH) -> dict[str, Dataset]:
    """Datasets by name (the data-root folder each fills)."""
    with open(path, encoding="utf-8") as f:
        raw = json.load(f)["datasets"]

    def source(entry: dict) -> SourceFile:
        return SourceFile(entry["repo"], entry["commit"], entry["path"], entry["dest"], entry["sha256"], entry["size"])

    return {name: Dataset(name, tuple(source(e) for e in spec["files"]),
                          tuple(Build(b["kind"], tuple(source(e) for e in b["inputs"]),
                                      {d: o["sha256"] for d, o in b["outputs"].items()})
                                for b in spec.get("builds", ())))
            for name, spec in raw.items()}


def select(datasets: dict[str, Dataset], only: Iterable[str] | None) -> list[Dataset]:
    """The datasets named in `only` (all when None), with a one-line error for an unknown name."""
    if not only:
        return list(datasets.values())
    names = [n.strip() for n in only if n.strip()]
    unknown = [n for n in names if n not in datasets]
    if unknown:
        raise InputError(f"unknown dataset '{unknown[0]}'; expected some of: {', '.join(datasets)}", field="--only")
    return [datasets[n] for n in names]


def _sha256_of(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _host(base: str) -> str:
    return urllib.parse.urlsplit(base).netloc or base


def _fetch(src: SourceFile, target: pathlib.Path, base: str, timeout: float) -> None:
    """Streams one URL into `target.part`, checks its SHA-256, then renames it into place."""
    url = src.url(base)
    part = target.with_name(target.name + ".part")
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, open(part, "wb") as out:
            for chunk in iter(lambda: response.read(_CHUNK), b""):
                digest.update(chunk)
                out.write(chunk)
    except urllib.error.HTTPError as err:
        part.unlink(missing_ok=True)
        raise DownloadError(f"HTTP {err.code} for {url}: the file is not at that repo/commit/path "
                            f"(or the mirror in ${BASE_ENV} lacks it)") from None
    except (urllib.error.URLError, OSError) as err:
        part.unlink(missing_ok=True)
        reason = getattr(err, "reason", err)
        raise DownloadError(f"could not reach {_host(base)}: {reason}; download on a connected machine "
                            f"(jaxwrite data download --output DIR) and pass --data-dir DIR") from None
    if src.sha256 is not None and digest.hexdigest() != src.sha256:
        part.unlink()
        raise DownloadError(f"checksum mismatch for {url}: expected sha256 {src.sha256}, got {digest.hexdigest()}; "
                            f"the partial file was removed. Check ${BASE_ENV} / proxies, then re-run",
                            path=str(target))
    os.replace(part, target)


def _ensure(src: SourceFile, root: pathlib.Path, base: str, timeout: float, report: DownloadReport,
            log: Callable[[str], None]) -> None:
    target = root / src.dest
    if target.exists():
        if src.sha256 is None:
            report.skipped.append(src.dest)
            report.unchecked.append(src.dest)
            return
        if _sha256_of(target) == src.sha256:
            report.skipped.append(src.dest)
            return
        log(f"{src.dest}: present but its checksum differs; fetching it again")
    log(f"fetch {src.url(base)}")
    _fetch(src, target, base, timeout)
    report.fetched.append(src.dest)
    if src.sha256 is None:
        report.unchecked.append(src.dest)


# --- builds: files of the layout derived from upstream files --------------------------------------

def critic_prompts(prompt_py: str) -> dict[str, str]:
    """WritingBench prompt.py -> {critic_system.txt, critic_user.format.txt} (string literals, `.strip()`ped).

    Parsed, never executed: only module-level `NAME = "literal"` assignments are read.
    """
    wanted = {"evaluate_system": "writingbench/prompts/critic_system.txt",
              "evaluate_prompt": "writingbench/prompts/critic_user.format.txt"}
    found: dict[str, str] = {}
    for node in ast.parse(prompt_py).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id in wanted):
            if not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
                raise DownloadError(f"expected a string literal, found {type(node.value).__name__}",
                                    path="prompt.py", line=node.lineno, field=node.targets[0].id)
            found[node.targets[0].id] = node.value.value.strip()
    missing = sorted(set(wanted) - set(found))
    if missing:
        raise DownloadError("expected a module-level string assignment", path="prompt.py", field=missing[0])
    return {wanted[name]: text for name, text in found.items()}


REQUIREMENT_SUBSETS_NOTE = (
    "Derived from X-PLUG/WritingBench benchmark_query/requirement/{style,format,length}/{req}_subset.jsonl and "
    "{req}_subset_C.jsonl at commit ae2d5176449b7b769815482641d35926f26793eb. R = query indices in file order; "
    "C = [index, [criterion names]] in file order.")


def requirement_subsets(subset_files: dict[str, tuple[str, str]]) -> dict[str, str]:
    """{req: (text of {req}_subset.jsonl, text of {req}_subset_C.jsonl)} -> requirement_subsets.json text."""
    out: dict = {"_note": REQUIREMENT_SUBSETS_NOTE}
    for req, (full, criteria) in subset_files.items():
        indices = [json.loads(line)["index"] for line in full.splitlines() if line.strip()]
        named = [[rec["index"], [c["name"] for c in rec["checklist"]]]
                 for rec in (json.loads(line) for line in criteria.splitlines() if line.strip())]
        out[req] = {"R": indices, "C": named}
    return {"writingbench/requirement_subsets.json": json.dumps(out, indent=1, ensure_ascii=False)}


def _build_critic_prompts(inputs: dict[str, pathlib.Path]) -> dict[str, str]:
    (prompt_py,) = inputs.values()
    return critic_prompts(prompt_py.read_text(encoding="utf-8"))


def _build_requirement_subsets(inputs: dict[str, pathlib.Path]) -> dict[str, str]:
    pairs: dict[str, list[str]] = {}
    for path, local in inputs.items():
        req = pathlib.PurePosixPath(path).parent.name
        slot = 1 if path.endswith("_C.jsonl") else 0
        pairs.setdefault(req, ["", ""])[slot] = local.read_text(encoding="utf-8")
    return requirement_subsets({req: (texts[0], texts[1]) for req, texts in pairs.items()})


BUILDERS: dict[str, Callable[[dict[str, pathlib.Path]], dict[str, str]]] = {
    "writingbench_critic_prompts": _build_critic_prompts,
    "writingbench_requirement_subsets": _build_requirement_subsets,
}


def _run_build(build: Build, root: pathlib.Path, base: str, timeout: float, report: DownloadReport,
               log: Callable[[str], None]) -> None:
    if all((root / d).exists() and _sha256_of(root / d) == sha for d, sha in build.outputs.items()):
        report.skipped.extend(build.outputs)
        return
    for src in build.inputs:
        _ensure(src, root, base, timeout, report, log)
    texts = BUILDERS[build.kind]({src.path: root / src.dest for src in build.inputs})
    for dest, text in texts.items():
        data = text.encode("utf-8")
        got = hashlib.sha256(data).hexdigest()
        if got != build.outputs[dest]:
            raise DownloadError(f"built file has sha256 {got}, expected {build.outputs[dest]}; upstream inputs "
                                f"changed or were altered in transit (nothing was written)", path=dest)
        target = root / dest
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        report.built.append(dest)


def download_plan(datasets: list[Dataset], base: str) -> list[tuple[str, str, str | None]]:
    """(url, dest, sha256 or None) for every file a download would fetch, build inputs included."""
    plan = []
    for ds in datasets:
        for src in ds.files + tuple(s for b in ds.builds for s in b.inputs):
            plan.append((src.url(base), src.dest, src.sha256))
    return plan


def resolve_base(base_url: str | None = None) -> str:
    return base_url or os.environ.get(BASE_ENV) or DEFAULT_BASE


def download(output: str | os.PathLike, only: Iterable[str] | None = None, base_url: str | None = None,
             timeout: float = 60.0, log: Callable[[str], None] = print,
             manifest: str | os.PathLike = MANIFEST_PATH) -> DownloadReport:
    """Fetches (or keeps) every file of the selected datasets under `output`; returns what happened."""
    base = resolve_base(base_url)
    root = pathlib.Path(output)
    report = DownloadReport()
    for ds in select(load_manifest(manifest), only):
        for src in ds.files:
            _ensure(src, root, base, timeout, report, log)
        for build in ds.builds:
            _run_build(build, root, base, timeout, report, log)
    return report
