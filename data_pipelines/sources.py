"""Random-access document sources for grain: cleaned text files, jsonl files, array_record files.

Every source yields `{"id": str, "text": str}` records and supports `len()` and indexing, which is
what `grain.MapDataset.source` needs for seeded shuffling, sharding and exact resumption.
"""
from __future__ import annotations

import glob
import json
import os
from typing import Any, Iterable, Sequence

import grain
from array_record.python import array_record_module

from data_pipelines.cleaning import DOCUMENT_CHARS, CleaningReport, clean_files
from jaxwrite.common import InputError, scan_jsonl
from jaxwrite.common.settings import MISSING, Settings, setting, settings_class

SOURCE_KINDS = ("corpus_dir", "text_files", "jsonl", "array_record")


class TextFilesSource:
    """Plain-text books, cleaned (Gutenberg markers, BOM, CRLF, illustrations) and split into documents."""

    def __init__(self, paths: Sequence[str], max_chars: int = DOCUMENT_CHARS):
        if not paths:
            raise InputError("expected at least one text file")
        for p in paths:
            if not os.path.exists(p):
                raise InputError("file not found", path=p)
        self._docs, self.report = clean_files(list(paths), max_chars)

    @property
    def cleaning_report(self) -> CleaningReport:
        return self.report

    def __len__(self) -> int:
        return len(self._docs)

    def __getitem__(self, index: int) -> dict[str, str]:
        doc_id, text = self._docs[index]
        return {"id": doc_id, "text": text}


class JsonlSource:
    """One document per jsonl line, text taken from `field`.

    on_error="error" raises InputError(file:line) on a malformed line or a missing / non-string field;
    on_error="skip" skips such lines and counts them in `skipped` (with the first bad line in
    `first_skipped`), so nothing is lost without a number.
    """

    def __init__(self, path: str, field: str = "text", id_field: str | None = None,
                 on_error: str = "error"):
        if on_error not in ("error", "skip"):
            raise ValueError(f"on_error must be 'error' or 'skip', got {on_error!r}")
        self.path, self.field = os.fspath(path), field
        self.skipped, self.first_skipped = 0, None
        self.empty = 0
        self._docs: list[tuple[str, str]] = []
        for lineno, rec, err in scan_jsonl(self.path):
            if err is None and not isinstance(rec.get(field), str):
                err = InputError("expected a string" if field in rec else "missing required field",
                                 path=self.path, line=lineno, field=field)
            if err is not None:
                if on_error == "error":
                    raise err
                self.skipped += 1
                self.first_skipped = self.first_skipped or str(err)
                continue
            text = rec[field]
            self.empty += not text.strip()
            doc_id = str(rec[id_field]) if id_field and id_field in rec else f"{os.path.basename(path)}:{lineno}"
            self._docs.append((doc_id, text))

    def __len__(self) -> int:
        return len(self._docs)

    def __getitem__(self, index: int) -> dict[str, str]:
        doc_id, text = self._docs[index]
        return {"id": doc_id, "text": text}


class ArrayRecordSource:
    """Records stored as UTF-8 JSON in array_record files (see `write_array_record`)."""

    def __init__(self, paths: str | Sequence[str]):
        paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
        for p in paths:
            if not os.path.exists(p):
                raise InputError("file not found", path=os.fspath(p))
        self._source = grain.sources.ArrayRecordDataSource([os.fspath(p) for p in paths])

    def __len__(self) -> int:
        return len(self._source)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return json.loads(self._source[index])


def write_array_record(path: str, records: Iterable[dict[str, Any]]) -> int:
    """Writes records as JSON into one array_record file (group_size 1 for fast random access)."""
    os.makedirs(os.path.dirname(os.fspath(path)) or ".", exist_ok=True)
    writer = array_record_module.ArrayRecordWriter(os.fspath(path), "group_size:1")
    count = 0
    for rec in records:
        writer.write(json.dumps(rec, ensure_ascii=False).encode("utf-8"))
        count += 1
    writer.close()
    return count


def corpus_files(corpus_dir: str) -> list[str]:
    """The book files of a corpus folder (`pg*.txt`, licence files excluded), sorted."""
    paths = sorted(glob.glob(os.path.join(os.fspath(corpus_dir), "pg*.txt")))
    if not paths:
        raise InputError("expected pg*.txt book files in the corpus folder", path=os.fspath(corpus_dir))
    return paths


@settings_class
class SourceSpec(Settings):
    """One document source of an LM mixture (`make_source`); a recipe names them in `data.extra_sources`."""
    kind: str = setting(MISSING, "corpus_dir (a folder of pg*.txt books), text_files, jsonl or array_record",
                        choices=SOURCE_KINDS)
    path: str = setting("", "the folder (corpus_dir) or file (jsonl, array_record)")
    paths: tuple[str, ...] = setting((), "the files (text_files)")
    weight: float = setting(1.0, "its share of the mixture (shares are renormalised)", above=0)
    max_chars: int = setting(DOCUMENT_CHARS, "characters per document of a book (corpus_dir, text_files)", min=1)
    field: str = setting("text", "the text field of a jsonl record")
    id_field: str | None = setting(None, "the id field of a jsonl record; None = the line number")
    on_error: str = setting("error", "a bad jsonl line: error, or skip and count it", choices=("error", "skip"))


def make_source(spec: SourceSpec) -> Any:
    """Builds the source a spec names."""
    if spec.kind == "corpus_dir":
        return TextFilesSource(corpus_files(spec.path), spec.max_chars)
    if spec.kind == "text_files":
        return TextFilesSource(list(spec.paths), spec.max_chars)
    if spec.kind == "jsonl":
        return JsonlSource(spec.path, spec.field, spec.id_field, spec.on_error)
    return ArrayRecordSource(spec.path)
