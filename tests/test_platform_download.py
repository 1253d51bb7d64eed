"""`jaxwrite data download` against a local http.server on 127.0.0.1 (never the network)."""
import argparse
import contextlib
import functools
import hashlib
import http.server
import json
import pathlib
import shutil
import socket
import threading

import pytest

from data_pipelines.download import (DEFAULT_BASE, MANIFEST_PATH, DownloadError, critic_prompts, download,
                                     download_plan, load_manifest, select)
from jaxwrite.cli._data_download import register_download
from jaxwrite.common import InputError

WB_COMMIT = "ae2d5176449b7b769815482641d35926f26793eb"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve(directory: pathlib.Path):
    """A static file server for `directory`; yields its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def put(root: pathlib.Path, repo: str, commit: str, path: str, data: bytes) -> None:
    target = root / repo / commit / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def entry(path: str, dest: str, data: bytes | None, repo="o/r", commit="c0ffee") -> dict:
    return {"repo": repo, "commit": commit, "path": path, "dest": dest,
            "sha256": hashlib.sha256(data).hexdigest() if data is not None else None,
            "size": len(data) if data is not None else None}


@pytest.fixture
def tiny(tmp_path):
    """A served tree and a manifest with one checked and one unchecked file (path with a space and '#')."""
    served = tmp_path / "served"
    book, raw = b"It was the best of times.\n", "响应".encode()
    put(served, "o/r", "c0ffee", "books/1-0.txt", book)
    put(served, "o/r", "c0ffee", "model results/m 1/writer#v1.json", raw)
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"datasets": {"corpus": {"files": [
        entry("books/1-0.txt", "corpus/pg1.txt", book),
        entry("model results/m 1/writer#v1.json", "corpus/raw/writer.json", None)]}}}))
    return served, manifest, book, raw


def test_fetches_checked_and_unchecked_files_into_the_layout(tiny, tmp_path):
    served, manifest, book, raw = tiny
    out = tmp_path / "out"
    with serve(served) as base:
        report = download(out, base_url=base, manifest=manifest, log=lambda s: None)
    assert (out / "corpus/pg1.txt").read_bytes() == book
    assert (out / "corpus/raw/writer.json").read_bytes() == raw
    assert report.fetched == ["corpus/pg1.txt", "corpus/raw/writer.json"]
    assert report.unchecked == ["corpus/raw/writer.json"]
    assert not list(out.rglob("*.part"))


def test_resume_skips_good_files_and_refetches_a_damaged_one(tiny, tmp_path):
    served, manifest, book, _ = tiny
    out = tmp_path / "out"
    with serve(served) as base:
        download(out, base_url=base, manifest=manifest, log=lambda s: None)
        again = download(out, base_url=base, manifest=manifest, log=lambda s: None)
        assert again.fetched == [] and again.skipped == ["corpus/pg1.txt", "corpus/raw/writer.json"]
        (out / "corpus/pg1.txt").write_bytes(b"damaged")
        messages = []
        third = download(out, base_url=base, manifest=manifest, log=messages.append)
    assert third.fetched == ["corpus/pg1.txt"] and (out / "corpus/pg1.txt").read_bytes() == book
    assert any("checksum differs" in m for m in messages)


def test_checksum_mismatch_is_one_clear_line_and_leaves_no_partial_file(tiny, tmp_path, monkeypatch):
    served, manifest, _, _ = tiny
    put(served, "o/r", "c0ffee", "books/1-0.txt", b"tampered")
    out = tmp_path / "out"
    monkeypatch.setenv("JAXWRITE_DOWNLOAD_BASE", "unused")
    with serve(served) as base, pytest.raises(DownloadError) as err:
        download(out, base_url=base, manifest=manifest, log=lambda s: None)
    text = str(err.value)
    assert "checksum mismatch" in text and "partial file was removed" in text and "\n" not in text
    assert not (out / "corpus/pg1.txt").exists() and not list(out.rglob("*.part"))


def test_unreachable_host_says_to_download_elsewhere(tiny, tmp_path, monkeypatch):
    _, manifest, _, _ = tiny
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]                   # closed again: nothing listens
    monkeypatch.setenv("JAXWRITE_DOWNLOAD_BASE", f"http://127.0.0.1:{port}")
    with pytest.raises(DownloadError) as err:
        download(tmp_path / "out", manifest=manifest, timeout=5, log=lambda s: None)
    assert f"could not reach 127.0.0.1:{port}" in str(err.value)
    assert "download on a connected machine" in str(err.value) and "--data-dir" in str(err.value)


def test_missing_file_on_the_server_names_the_url(tiny, tmp_path):
    served, manifest, _, _ = tiny
    (served / "o/r/c0ffee/books/1-0.txt").unlink()
    with serve(served) as base, pytest.raises(DownloadError, match=r"HTTP 404 for http://127\.0\.0\.1:\d+/o/r/c0ffee/"
                                                                    r"books/1-0\.txt"):
        download(tmp_path / "out", base_url=base, manifest=manifest, log=lambda s: None)


def test_dry_run_lists_pinned_urls(capsys):
    parser = argparse.ArgumentParser()
    register_download(parser.add_subparsers())
    args = parser.parse_args(["download", "--dry-run", "--output", "D", "--only", "writingbench,preferences"])
    assert args.func(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert (f"{DEFAULT_BASE}/X-PLUG/WritingBench/{WB_COMMIT}/benchmark_query/benchmark_all.jsonl\t"
            f"D/writingbench/benchmark_all.jsonl\t") in lines[0]
    assert any(line.startswith(f"{DEFAULT_BASE}/X-PLUG/WritingBench/{WB_COMMIT}/prompt.py\t") and
               line.endswith("\tunchecked") for line in lines)
    # Paths with spaces, '#' and CJK are percent-encoded.
    assert any("/model%20results/Doubao1.5-pro-32k.250115.foreval_ixfdnt4mha683ba7e6/"
               "doubao1.5-pro_%E5%89%AF%E6%9C%AC.json\t" in line for line in lines)
    assert not any("corpus_en" in line for line in lines)


def test_manifest_covers_the_shared_layout_with_real_checksums():
    datasets = load_manifest()
    assert set(datasets) == {"writingbench", "longbench_write", "corpus_en", "corpus_zh", "refinebench",
                             "preferences"}
    plan = download_plan(list(datasets.values()), DEFAULT_BASE)
    dests = {d for _, d, _ in plan}
    for dest in ("writingbench/benchmark_all.jsonl", "longbench_write/judge.txt", "corpus_en/pg98.txt",
                 "corpus_zh/pg27166.txt", "refinebench/refinebench_samples_46_vis.json"):
        assert dest in dests
    unchecked = {dest for _, dest, sha in plan if sha is None}
    assert ".upstream/X-PLUG/WritingBench/prompt.py" in unchecked
    assert all(d.startswith("preferences/writingpreferencebench_zh_pool/raw/") for d in unchecked - {
        ".upstream/X-PLUG/WritingBench/prompt.py"})
    assert all(len(sha) == 64 for _, dest, sha in plan if dest not in unchecked)
    with pytest.raises(InputError, match="unknown dataset 'wb'"):
        select(datasets, ["wb"])


def test_critic_prompt_extraction_reads_literals_without_running_code():
    source = 'import os\nevaluate_system = """\n  Be fair.\n"""\nevaluate_prompt = "\\nQ: {query}\\n"\n'
    assert critic_prompts(source) == {"writingbench/prompts/critic_system.txt": "Be fair.",
                                      "writingbench/prompts/critic_user.format.txt": "Q: {query}"}
    with pytest.raises(DownloadError, match="prompt.py:2 field 'evaluate_system': expected a string literal"):
        critic_prompts('x = 1\nevaluate_system = os.getenv("A")\nevaluate_prompt = ""\n')


def _served_writingbench(data_dir: pathlib.Path, served: pathlib.Path) -> None:
    """The upstream WritingBench files as they are at the pinned commit, rebuilt from the shared copy."""
    wb = data_dir / "writingbench"
    repo = "X-PLUG/WritingBench"
    put(served, repo, WB_COMMIT, "benchmark_query/benchmark_all.jsonl", (wb / "benchmark_all.jsonl").read_bytes())
    put(served, repo, WB_COMMIT, "LICENSE", (wb / "LICENSE").read_bytes())
    system = (wb / "prompts/critic_system.txt").read_text(encoding="utf-8")
    user = (wb / "prompts/critic_user.format.txt").read_text(encoding="utf-8")
    put(served, repo, WB_COMMIT, "prompt.py",
        f"evaluate_system = {system!r}\n\nevaluate_prompt = {chr(10) + user + chr(10)!r}\n".encode())
    records = {}
    for line in (wb / "benchmark_all.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        records[rec["index"]] = rec
    subsets = json.loads((wb / "requirement_subsets.json").read_text(encoding="utf-8"))
    for req in ("style", "format", "length"):
        def upstream(i, names=None):
            r = records[i]
            checklist = (r["checklist"] if names is None
                         else [c for n in names for c in r["checklist"] if c["name"] == n])
            return json.dumps({"index": i, "domain1": r["domain1"], "domain2": r["domain2"], "query": r["query"],
                               "checklist": checklist}, ensure_ascii=False) + "\n"
        base = f"benchmark_query/requirement/{req}/{req}_subset"
        put(served, repo, WB_COMMIT, base + ".jsonl", "".join(upstream(i) for i in subsets[req]["R"]).encode())
        put(served, repo, WB_COMMIT, base + "_C.jsonl", "".join(upstream(i, n) for i, n in subsets[req]["C"]).encode())


# The embedded sample's benchmark_all.jsonl holds 41 of the 1,000 upstream lines, so neither it nor the
# subsets built from it has the pinned checksum; every other file of the two data sets it holds unchanged.
SAMPLE_CUT = ("writingbench/benchmark_all.jsonl", "writingbench/requirement_subsets.json")


def _manifest_without(dests: tuple[str, ...], path: pathlib.Path) -> pathlib.Path:
    """The real manifest less the files and builds that write `dests`; every other checksum as pinned."""
    raw = json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))
    for spec in raw["datasets"].values():
        spec["files"] = [f for f in spec["files"] if f["dest"] not in dests]
        spec["builds"] = [b for b in spec.get("builds", ()) if not set(b["outputs"]) & set(dests)]
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


def test_real_manifest_rebuilds_writingbench_and_longbench_byte_for_byte(data_dir, figure, tmp_path):
    cut = figure((), SAMPLE_CUT)
    manifest = figure(MANIFEST_PATH, _manifest_without(SAMPLE_CUT, tmp_path / "manifest.json"))
    served = tmp_path / "served"
    _served_writingbench(data_dir, served)
    lw_commit = "3fcfdff43deceb49f7936c6bf25ad88d61df0bfa"
    for name in ("longbench_write.jsonl", "longbench_write_en.jsonl", "longwrite_ruler.jsonl", "judge.txt"):
        put(served, "THUDM/LongWriter", lw_commit, f"evaluation/{name}",
            (data_dir / "longbench_write" / name).read_bytes())
    put(served, "THUDM/LongWriter", lw_commit, "LICENSE.txt", (data_dir / "longbench_write/LICENSE").read_bytes())
    out = tmp_path / "data"
    with serve(served) as base:
        report = download(out, only=["writingbench", "longbench_write"], base_url=base, log=lambda s: None,
                          manifest=manifest)
        assert sorted(report.built) == [d for d in ("writingbench/prompts/critic_system.txt",
                                                    "writingbench/prompts/critic_user.format.txt",
                                                    "writingbench/requirement_subsets.json") if d not in cut]
        assert report.unchecked == [".upstream/X-PLUG/WritingBench/prompt.py"]
        assert "longbench_write/longbench_write.jsonl" in report.fetched and "writingbench/LICENSE" in report.fetched
        for rel in ("writingbench/benchmark_all.jsonl", "writingbench/requirement_subsets.json",
                    "writingbench/prompts/critic_system.txt", "writingbench/prompts/critic_user.format.txt",
                    "longbench_write/judge.txt", "longbench_write/longwrite_ruler.jsonl"):
            assert rel in cut or (out / rel).read_bytes() == (data_dir / rel).read_bytes(), rel
        shutil.rmtree(out / ".upstream")            # builds whose outputs are good need no inputs
        again = download(out, only=["writingbench"], base_url=base, log=lambda s: None, manifest=manifest)
    assert again.fetched == [] and again.built == []
