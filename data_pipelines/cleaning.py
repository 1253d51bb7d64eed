"""Corpus cleaning for Project Gutenberg plain text, and splitting books into documents.

Cleaning, in order: drop a UTF-8 byte-order mark, normalise CRLF/CR line endings to LF, keep only the
text between the `*** START OF ...` and `*** END OF ...` marker lines (when present), remove
`[Illustration ...]` blocks (which may span lines and nest brackets), and collapse the runs of blank
lines those removals leave behind.

Documents: a book is cut into windows of whole paragraphs (blank-line separated) holding at most
`max_chars` characters each. A paragraph longer than `max_chars` is cut at line breaks, and a line
longer than that is cut hard. Windows keep the book's reading order, so a language model sees long,
contiguous prose; the tokenised pipeline later splits any window that does not fit one row.
Empty documents are never produced silently: whitespace-only input is counted in the report.
"""
from __future__ import annotations

import dataclasses
import os
import re

_BOM = "\ufeff"
_START = re.compile(r"^\*\*\* ?START OF .*PROJECT GUTENBERG.*\*\*\*\s*$", re.MULTILINE)
_END = re.compile(r"^\*\*\* ?END OF .*PROJECT GUTENBERG.*\*\*\*\s*$", re.MULTILINE)
_MANY_BLANKS = re.compile(r"\n[ \t]*(?:\n[ \t]*){2,}")
_ILLUSTRATION = "[Illustration"


@dataclasses.dataclass
class FileReport:
    """What cleaning did to one file."""
    path: str
    bytes_before: int
    bytes_after: int
    had_bom: bool
    had_crlf: bool
    gutenberg_markers: bool
    illustrations_removed: int
    documents: int
    empty: bool


@dataclasses.dataclass
class CleaningReport:
    """Per-file figures plus totals; `empty_files` counts files that cleaned down to nothing."""
    files: list[FileReport] = dataclasses.field(default_factory=list)

    @property
    def bytes_before(self) -> int:
        return sum(f.bytes_before for f in self.files)

    @property
    def bytes_after(self) -> int:
        return sum(f.bytes_after for f in self.files)

    @property
    def documents(self) -> int:
        return sum(f.documents for f in self.files)

    @property
    def empty_files(self) -> int:
        return sum(f.empty for f in self.files)

    def to_dict(self) -> dict:
        return {
            "files": [dataclasses.asdict(f) for f in self.files],
            "totals": {"bytes_before": self.bytes_before, "bytes_after": self.bytes_after,
                       "documents": self.documents, "empty_files": self.empty_files},
        }


def strip_gutenberg_markers(text: str) -> tuple[str, bool]:
    """Keeps the text strictly between the START and END marker lines; (text, markers_found)."""
    start = _START.search(text)
    end = _END.search(text, start.end() if start else 0)
    if not start and not end:
        return text, False
    lo = start.end() if start else 0
    hi = end.start() if end else len(text)
    return text[lo:hi], True


def remove_illustrations(text: str) -> tuple[str, int]:
    """Removes `[Illustration]` / `[Illustration: ...]` blocks, matching nested brackets."""
    out, count, pos = [], 0, 0
    while True:
        at = text.find(_ILLUSTRATION, pos)
        if at < 0:
            out.append(text[pos:])
            break
        out.append(text[pos:at])
        depth, i = 0, at
        while i < len(text):
            if text[i] == "[":
                depth += 1
            elif text[i] == "]":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        count += 1
        pos = i + 1  # an unclosed block runs to the end of the text and is dropped with it
    return "".join(out), count


def clean_text(raw: str) -> tuple[str, dict]:
    """Cleans one book's text; returns (clean_text, facts about what was removed)."""
    had_bom = raw.startswith(_BOM)
    text = raw.lstrip(_BOM)
    had_crlf = "\r\n" in text
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text, markers = strip_gutenberg_markers(text)
    text, illustrations = remove_illustrations(text)
    text = _MANY_BLANKS.sub("\n\n", text).strip("\n")
    if not text.strip():
        text = ""
    return text, {"had_bom": had_bom, "had_crlf": had_crlf, "gutenberg_markers": markers,
                  "illustrations_removed": illustrations}


# Characters per document a book is cut into (every reader of the corpora: LM pipeline, seqio, TFDS, recipes).
DOCUMENT_CHARS = 20_000


def split_documents(text: str, max_chars: int = DOCUMENT_CHARS) -> list[str]:
    """Groups consecutive paragraphs into documents of at most `max_chars` characters."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be positive, got {max_chars}")
    pieces: list[str] = []
    for para in re.split(r"\n[ \t]*\n", text):
        if not para.strip():
            continue
        pieces.extend(_cut(para, max_chars))
    docs, current = [], ""
    for piece in pieces:
        joined = f"{current}\n\n{piece}" if current else piece
        if len(joined) <= max_chars:
            current = joined
        else:
            docs.append(current)
            current = piece
    if current:
        docs.append(current)
    return docs


def _cut(para: str, max_chars: int) -> list[str]:
    """Cuts an over-long paragraph at line breaks, then hard at `max_chars`."""
    if len(para) <= max_chars:
        return [para]
    out, current = [], ""
    for line in para.split("\n"):
        while len(line) > max_chars:
            if current:
                out.append(current)
                current = ""
            out.append(line[:max_chars])
            line = line[max_chars:]
        joined = f"{current}\n{line}" if current else line
        if len(joined) <= max_chars:
            current = joined
        else:
            out.append(current)
            current = line
    if current:
        out.append(current)
    return out


def clean_files(paths: list[str], max_chars: int = DOCUMENT_CHARS) -> tuple[list[tuple[str, str]], CleaningReport]:
    """Cleans and splits each file; returns ([(doc_id, text), ...], report).

    doc ids are `<file stem>/<n>` so a document can be traced back to its book.
    """
    docs: list[tuple[str, str]] = []
    report = CleaningReport()
    for path in paths:
        with open(path, "rb") as f:
            raw_bytes = f.read()
        text, facts = clean_text(raw_bytes.decode("utf-8"))
        file_docs = split_documents(text, max_chars) if text else []
        stem = os.path.splitext(os.path.basename(path))[0]
        docs.extend((f"{stem}/{i}", d) for i, d in enumerate(file_docs))
        report.files.append(FileReport(
            path=os.fspath(path), bytes_before=len(raw_bytes), bytes_after=len(text.encode("utf-8")),
            documents=len(file_docs), empty=not text, **facts))
    return docs, report
