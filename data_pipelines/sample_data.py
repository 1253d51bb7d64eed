"""Builds the data sample that ships inside the package (jaxwrite/sample_data/) from a full data root.

The sample has the data root's layout (writingbench/, longbench_write/, refinebench/, preferences/,
corpus_en/, corpus_zh/), so every loader reads it unchanged; it is small enough to ship (about 1.3 MB,
checked against a 2 MB limit) and rebuilt byte for byte from the same inputs:

  jaxwrite data build-sample --source ../shared/data --output jaxwrite/sample_data

What goes in, and why (licences: jaxwrite/sample_data/README.md, copied from `SAMPLE_README`):
- WritingBench: the English and Chinese queries with the shortest official critic prompts (the query
  once, the longest criterion twice), so the critic prompt fits a 4,096-token context; their records
  are the upstream lines unchanged. requirement_subsets.json is cut to those indices.
- LongBench-Write: the three upstream files whole (they are small).
- RefineBench: one upstream sample file whole, unchanged (CC BY-NC-ND: no modified copies).
- Preferences: whole prompts of the WritingPreferenceBench pool, their lines unchanged, chosen so each
  has pairs with a score gap of at least 1 while the responses stay short.
- Corpora: the opening of a few public-domain books (cut at a paragraph break), with the file names of
  the full corpora, so the recipes' held-out books (pg11, pg27166) exist in the sample too.
"""
from __future__ import annotations

import gzip
import io
import json
import os
import shutil

from jaxwrite.common import InputError

MAX_BYTES = 2_000_000
WB_EN, WB_ZH = 24, 8                  # the critic demo needs 20 English queries; the quickstart 3 + 3
WB_NAMED = tuple(range(1, 13))        # queries the test suite names (scoring and critic-prompt tests)
PREF_PROMPTS, PREF_RESPONSES = 12, 8  # prompts kept, shortest responses considered per prompt
POOL = "preferences/writingpreferencebench_zh_pool/responses_with_human_scores.jsonl.gz"
REFINEBENCH_FILE = "refinebench_samples_46_vis.json"
# file -> bytes of its opening kept. pg11 / pg27166 are the recipes' held-out books (configs: eval_holdout).
CORPUS_EXCERPTS = {
    "corpus_en": {"pg11.txt": 60_000, "pg84.txt": 60_000, "pg1661.txt": 60_000},
    "corpus_zh": {"pg27166.txt": 45_000, "pg24264.txt": 60_000},
}
COPIED = ("writingbench/LICENSE", "writingbench/prompts/critic_system.txt",
          "writingbench/prompts/critic_user.format.txt", "longbench_write/LICENSE", "longbench_write/README.md",
          "longbench_write/judge.txt", "longbench_write/longbench_write.jsonl",
          "longbench_write/longbench_write_en.jsonl", "longbench_write/longwrite_ruler.jsonl",
          f"refinebench/{REFINEBENCH_FILE}", "corpus_en/LICENSE_gutenbergbooks.txt",
          "corpus_zh/LICENSE_gutenbergbooks.txt")


def _read_lines(path: str) -> list[bytes]:
    opener = gzip.open if path.endswith(".gz") else open
    if not os.path.exists(path):
        raise InputError("file not found in the source data root", path=path)
    with opener(path, "rb") as f:
        return [line for line in f.read().split(b"\n") if line.strip()]


def _write(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if path.endswith(".gz"):   # mtime 0 and no file name in the header: the same bytes on every build
        buf = io.BytesIO()
        with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
            gz.write(data)
        data = buf.getvalue()
    with open(path, "wb") as f:
        f.write(data)


def writingbench_indices(records: list[dict]) -> list[int]:
    """The WB_EN English and WB_ZH Chinese indices with the shortest critic prompts, and WB_NAMED; sorted."""
    def prompt_size(r: dict) -> tuple[int, int]:
        return len(r["query"]) + 2 * max(len(str(c)) for c in r["checklist"]), r["index"]
    chosen = []
    for lang, count in (("en", WB_EN), ("zh", WB_ZH)):
        chosen += [r["index"] for r in sorted((r for r in records if r["lang"] == lang), key=prompt_size)[:count]]
    return sorted(set(chosen) | {r["index"] for r in records if r["index"] in WB_NAMED})


def _writingbench(src: str, out: str) -> list[int]:
    lines = _read_lines(os.path.join(src, "writingbench", "benchmark_all.jsonl"))
    records = [json.loads(line) for line in lines]
    keep = set(writingbench_indices(records))
    _write(os.path.join(out, "writingbench", "benchmark_all.jsonl"),
           b"".join(line + b"\n" for line, r in zip(lines, records) if r["index"] in keep))
    with open(os.path.join(src, "writingbench", "requirement_subsets.json"), encoding="utf-8") as f:
        subsets = json.load(f)
    cut = {"_note": subsets.get("_note", "") + f" Cut to the {len(keep)} queries of jaxwrite's embedded sample."}
    for req, sub in subsets.items():
        if req.startswith("_"):
            continue
        cut[req] = {"R": [i for i in sub["R"] if i in keep], "C": [c for c in sub["C"] if c[0] in keep]}
    _write(os.path.join(out, "writingbench", "requirement_subsets.json"),
           (json.dumps(cut, ensure_ascii=False, indent=1) + "\n").encode("utf-8"))
    return sorted(keep)


def preference_prompts(records: list[dict]) -> list[str]:
    """PREF_PROMPTS question ids: prompts whose PREF_RESPONSES shortest responses hold a pair at least
    1 point apart in mean human score, the ones with the least text first."""
    groups: dict[str, list[dict]] = {}
    for r in records:
        groups.setdefault(r["question_id"], []).append(r)
    ranked = []
    for qid, rs in groups.items():
        short = sorted(rs, key=lambda r: (len(r["response"]), r["model"]))[:PREF_RESPONSES]
        means = [sum(s["score"] for s in r["human_scores"]) / len(r["human_scores"]) for r in short]
        if max(means) - min(means) >= 1:
            ranked.append((sum(len(r["prompt"]) + len(r["response"]) for r in short), qid))
    return [qid for _, qid in sorted(ranked)[:PREF_PROMPTS]]


def _preferences(src: str, out: str) -> int:
    lines = _read_lines(os.path.join(src, POOL))
    records = [json.loads(line) for line in lines]
    qids = set(preference_prompts(records))
    # Each kept prompt's PREF_RESPONSES shortest responses, in the pool's order, lines unchanged.
    keep = set()
    for qid in qids:
        rs = sorted((i for i, r in enumerate(records) if r["question_id"] == qid),
                    key=lambda i: (len(records[i]["response"]), records[i]["model"]))
        keep.update(rs[:PREF_RESPONSES])
    _write(os.path.join(out, POOL), b"".join(lines[i] + b"\n" for i in sorted(keep)))
    return len(keep)


def _excerpt(data: bytes, size: int) -> bytes:
    """The opening `size` bytes of a book, extended to the next paragraph break (a whole UTF-8 text)."""
    if len(data) <= size:
        return data
    text = data.replace(b"\r\n", b"\n")
    cut = text.find(b"\n\n", size)
    return text[: cut if cut > 0 else size] + b"\n"


def build_sample(src: str, out: str) -> dict:
    """Writes the sample under `out` (replacing it); returns {file: bytes}. Raises past MAX_BYTES."""
    src, out = os.path.abspath(src), os.path.abspath(out)
    if not os.path.isdir(os.path.join(src, "writingbench")):
        raise InputError("expected a full data root (writingbench/, corpus_en/, ...)", path=src)
    readme = os.path.join(out, "README.md")
    keep_readme = open(readme, "rb").read() if os.path.exists(readme) else None
    for name in CORPUS_EXCERPTS.keys() | {"writingbench", "longbench_write", "refinebench", "preferences"}:
        shutil.rmtree(os.path.join(out, name), ignore_errors=True)
    for rel in COPIED:
        path = os.path.join(src, rel)
        if not os.path.exists(path):
            raise InputError("file not found in the source data root", path=path)
        with open(path, "rb") as f:
            _write(os.path.join(out, rel), f.read())
    _writingbench(src, out)
    _preferences(src, out)
    for corpus, books in CORPUS_EXCERPTS.items():
        for name, size in books.items():
            with open(os.path.join(src, corpus, name), "rb") as f:
                _write(os.path.join(out, corpus, name), _excerpt(f.read(), size))
    if keep_readme is not None:   # the README is written by hand (sources, licences); never regenerated
        _write(readme, keep_readme)
    sizes = {os.path.relpath(os.path.join(d, n), out): os.path.getsize(os.path.join(d, n))
             for d, _, names in os.walk(out) for n in names if n != "__pycache__" and not n.endswith(".pyc")}
    total = sum(sizes.values())
    if total > MAX_BYTES:
        raise InputError(f"the sample is {total:,} bytes, over the {MAX_BYTES:,}-byte limit", path=out)
    return dict(sorted(sizes.items()))
