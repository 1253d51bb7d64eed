"""The one resumable record job: resume after a kill without loss or duplicates, duplicate ids refused,
compressed outputs, bad records skipped and counted; and `jaxwrite generate` running on it."""
import gzip
import json

import pytest

from jaxwrite.common import InputError, RecordJob, append_jsonl, read_done_ids, read_input, read_jsonl


def _ids(path):
    return [rec["id"] for _, rec in read_jsonl(path)]


def _run(path, items, fail_on=(), **kwargs):
    """Writes {"id", "value"} for every item not done, in batches of 2; returns the job."""
    job = RecordJob(path, "id", desc="test", progress=False, **kwargs)
    for chunk in job.batches(job.pending(items), 2):
        for i in chunk:
            if i in fail_on:
                job.fail({"id": i, "error": "no verdict"})
            else:
                job.write({"id": i, "value": i * 10})
    job.close()
    return job


@pytest.mark.parametrize("tail, kept", [(b'{"id": 3, "value": 30}', [1, 2, 3]),   # lacks only its newline
                                        (b'{"id": 3, "val', [1, 2])])             # cut mid-record
def test_resume_after_a_kill_keeps_whole_records_and_writes_no_duplicates(tmp_path, tail, kept):
    out = tmp_path / "out.jsonl"
    out.write_bytes(b'{"id": 1, "value": 10}\n{"id": 2, "value": 20}\n' + tail)
    job = _run(out, [1, 2, 3, 4, 5])
    assert _ids(out) == kept + [i for i in [3, 4, 5] if i not in kept]
    assert job.resumed == len(kept) and job.written == 5 - len(kept)
    assert _run(out, [1, 2, 3, 4, 5]).written == 0 and len(_ids(out)) == 5


def test_append_keeps_a_complete_last_line_without_newline(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text('{"id": 1}')
    assert read_done_ids(out, "id") == {1}
    append_jsonl(out, {"id": 2})
    assert out.read_text() == '{"id": 1}\n{"id": 2}\n'


def test_duplicate_input_ids_are_refused_before_anything_runs(tmp_path):
    items = [(1, "a"), (2, "b"), (1, "c")]
    job = RecordJob(tmp_path / "out.jsonl", "id", desc="test", progress=False)
    with pytest.raises(InputError, match=r"in\.jsonl:7 field 'id': expected unique ids, 'a' repeats \(first on line 3\)"):
        job.pending(items, id_of=lambda it: it[1] if it[1] != "c" else "a", source="in.jsonl",
                    line_of=lambda it: {1: 3, 2: 5}[it[0]] if it[1] != "c" else 7)
    with pytest.raises(InputError, match="expected a string or a number as the id, found list"):
        job.pending([["x"]], id_of=lambda it: it)
    assert not (tmp_path / "out.jsonl").exists()


def test_gzip_output_is_written_and_resumed_compressed(tmp_path):
    out = tmp_path / "out.jsonl.gz"
    _run(out, [1, 2, 3])
    assert out.read_bytes()[:2] == b"\x1f\x8b"
    with gzip.open(out, "rt") as f:
        assert [json.loads(x)["id"] for x in f] == [1, 2, 3]
    # A kill mid-append leaves the last gzip member cut short: that record is written again, once.
    whole = out.read_bytes()
    out.write_bytes(whole + gzip.compress(b'{"id": 4, "value": 40}\n')[:15])
    assert read_done_ids(out, "id") == {1, 2, 3}
    job = _run(out, [1, 2, 3, 4, 5])
    assert job.resumed == 3 and _ids(out) == [1, 2, 3, 4, 5] and out.read_bytes()[:2] == b"\x1f\x8b"
    # Plain text under a .gz name (as older versions wrote) is refused, never overwritten.
    plain = tmp_path / "old.jsonl.gz"
    plain.write_text('{"id": 1}\n')
    with pytest.raises(InputError, match="expected gzip data"):
        RecordJob(plain, "id", desc="test", progress=False)
    assert plain.read_text() == '{"id": 1}\n'


def test_bad_records_are_reported_skipped_and_counted_while_the_rest_run(tmp_path, capsys):
    items = [(2, {"id": "a", "text": "x"}), (3, {"id": "b", "text": 7}), (4, {"id": "c", "text": "z"})]
    out = tmp_path / "out.jsonl"
    job = RecordJob(out, "id", desc="test", progress=False, failures=tmp_path / "out.failures.jsonl")
    todo = job.pending(items, id_of=lambda it: it[1]["id"], source="in.jsonl", line_of=lambda it: it[0])

    def prepare(item):
        if not isinstance(item[1]["text"], str):
            raise InputError("expected a string", field="text")
        return item[1]["text"].upper()

    for (_, rec), text in job.each(todo, prepare):
        job.write({"id": rec["id"], "text": text})
    assert job.close() == 1 and (job.written, job.skipped, job.failed) == (2, 1, 0)
    assert _ids(out) == ["a", "c"]
    (failure,) = [rec for _, rec in read_jsonl(tmp_path / "out.failures.jsonl")]
    assert failure == {"id": "b", "line": 3, "error": "in.jsonl:3: field 'text': expected a string"}
    err = capsys.readouterr().err
    assert "test: error: in.jsonl:3: field 'text': expected a string" in err and "1 bad record(s) skipped" in err


BAD_LINES = (b'{"id": 1, "query": "a story"}\n'
             b'{"id": 2, "query": "the judge"\n'                  # line 2: not valid JSON
             b'{"id": 3, "query": "caf\xe9"}\n'                   # line 3: not UTF-8
             b'\n'
             b'[4, "an array"]\n'                                 # line 5: not an object
             b'{"id": 6, "query": "a river"}\n')


def test_unreadable_input_lines_are_reported_skipped_and_counted_while_the_rest_run(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_bytes(BAD_LINES)
    lines = read_input(src)
    assert [line for line, _ in lines.records] == [1, 6] and [e.line for e in lines.bad] == [2, 3, 5]
    job = RecordJob(tmp_path / "out.jsonl", "id", desc="test", progress=False,
                    failures=tmp_path / "out.failures.jsonl")
    todo = job.pending(lines.records, id_of=lambda r: r[1]["id"], source=str(src), line_of=lambda r: r[0],
                       unreadable=lines.bad)
    for chunk in job.batches(todo, 8):
        for _, rec in chunk:
            job.write({"id": rec["id"]})
    assert job.close() == 3 and (job.written, job.skipped) == (2, 3)
    assert _ids(tmp_path / "out.jsonl") == [1, 6]
    failures = [rec for _, rec in read_jsonl(tmp_path / "out.failures.jsonl")]
    assert [(f["id"], f["line"]) for f in failures] == [(None, 2), (None, 3), (None, 5)]
    err = capsys.readouterr().err
    assert f"test: error: {src}:2: invalid JSON" in err
    assert f"test: error: {src}:3: expected UTF-8 text, found byte 0xe9" in err
    assert f"test: error: {src}:5: expected a JSON object, found list" in err
    assert "3 bad record(s) skipped" in err
    # Duplicate ids are still refused up front, before any bad line is reported.
    with pytest.raises(InputError, match="expected unique ids"):
        RecordJob(tmp_path / "again.jsonl", "id", desc="test", progress=False).pending(
            lines.records * 2, id_of=lambda r: r[1]["id"], unreadable=lines.bad)


def test_numbered_inputs_keep_their_numbers_past_a_bad_line(tmp_path):
    """LongBench-Write's files have no ids: a record's index is its number in the file, so a bad line
    skipped before it must not shift it (the scorer keys on the index)."""
    import argparse
    from jaxwrite.cli.generate import _with_ids

    src = tmp_path / "lbw.jsonl"
    src.write_bytes(b'{"prompt": "a"}\n{"prompt": \n{"prompt": "c"}\n')
    args = argparse.Namespace(preset="longbench-write", id_field=None, input=str(src))
    records, id_field, _ = _with_ids(read_input(src), args)
    assert id_field == "index" and [(line, rec["index"]) for line, rec in records] == [(1, 1), (3, 3)]


def test_failed_records_are_counted_and_retried_on_the_next_run(tmp_path):
    out, failures = tmp_path / "out.jsonl", tmp_path / "out.failures.jsonl"
    job = _run(out, [1, 2, 3], fail_on={2}, failures=failures)
    assert (job.written, job.failed) == (2, 1) and _ids(failures) == [2]
    again = _run(out, [1, 2, 3], failures=failures)
    assert (again.resumed, again.written) == (2, 1) and _ids(out) == [1, 3, 2]


def test_generate_resumes_kills_skips_bad_lines_and_writes_gzip(tmp_path):
    from jaxwrite.cli import main as cli_main
    from jaxwrite.models import save_hf
    from test_infer_support import model, tokenizer_dir

    hf = tmp_path / "hf"
    save_hf(model(), str(hf), tokenizer_dir=tokenizer_dir())
    rows = [{"id": 1, "query": "a story"}, {"id": 2, "messages": [{"role": "user", "content": 5}]},
            {"id": 3, "query": "the judge"}]
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl.gz"
    args = ["generate", "--model", str(hf), "--input", str(prompts), "--output", str(out),
            "--temperature", "0", "--max-new-tokens", "4"]
    assert cli_main(args) == 1   # line 2's content is not a string: reported, the others generated
    assert sorted(_ids(out)) == [1, 3] and out.read_bytes()[:2] == b"\x1f\x8b"
    (error,) = [rec for _, rec in read_jsonl(tmp_path / "out.jsonl.gz.errors.jsonl")]
    assert error["id"] == 2 and error["error"].startswith(f"{prompts}:2 field 'messages'")
    rows[1]["messages"][0]["content"] = "river"
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert cli_main(args) == 0 and sorted(_ids(out)) == [1, 2, 3]
    # a repeated id is refused before the model loads, naming the file and line
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows + [rows[0]]))
    assert cli_main(args) == 2


def test_generate_skips_unreadable_lines_and_exits_non_zero_with_their_count(tmp_path, capsys):
    """A line that is not JSON, not UTF-8 or not an object is reported (file:line, what) and skipped;
    the good lines are generated; the count comes at the end and the exit status is non-zero."""
    from jaxwrite.cli import main as cli_main
    from jaxwrite.models import save_hf
    from test_infer_support import model, tokenizer_dir

    hf = tmp_path / "hf"
    save_hf(model(), str(hf), tokenizer_dir=tokenizer_dir())
    prompts, out = tmp_path / "prompts.jsonl", tmp_path / "out.jsonl"
    prompts.write_bytes(BAD_LINES)
    args = ["generate", "--model", str(hf), "--input", str(prompts), "--output", str(out),
            "--temperature", "0", "--max-new-tokens", "2"]
    assert cli_main(args) == 1
    assert sorted(_ids(out)) == [1, 6]
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for line, what in [(2, "invalid JSON"), (3, "expected UTF-8 text"), (5, "expected a JSON object, found list")]:
        assert f"generate: error: {prompts}:{line}: {what}" in err
    assert "generate: 3 bad record(s) skipped" in err
    errors = [rec for _, rec in read_jsonl(f"{out}.errors.jsonl")]
    assert [e["line"] for e in errors] == [2, 3, 5]
    # Mended, they run on the re-run; the ones already done are not generated again.
    prompts.write_text("".join(json.dumps({"id": i, "query": "a story"}) + "\n" for i in (1, 2, 3, 4, 6)))
    assert cli_main(args) == 0 and sorted(_ids(out)) == [1, 2, 3, 4, 6]


def test_unreadable_inputs_and_outputs_fail_with_one_line(tmp_path):
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(b'{"id": 1}\n{"id": "caf\xe9"}\n')
    with pytest.raises(InputError, match=r"latin1\.jsonl:2: expected UTF-8 text, found byte 0xe9"):
        list(read_jsonl(bad))
    with pytest.raises(InputError, match="expected an output file, found a directory"):
        RecordJob(tmp_path, "id", desc="test", progress=False)


def test_failures_are_summed_up_by_kind_each_with_its_own_advice(tmp_path, capsys):
    from jaxwrite.chat import ChatResult
    job = RecordJob(tmp_path / "out.jsonl", "id", desc="test", unit="item", failures=tmp_path / "f.jsonl",
                    progress=False)
    results = {1: ChatResult(text="", error="HTTP 400: too long", retryable=False),
               2: ChatResult(text="", error="HTTP 503: busy"), 3: ChatResult(text="no verdict here")}
    assert [r.failure_kind for r in results.values()] == ["permanent", "transient", "unparseable"]
    for i, result in results.items():
        job.fail({"id": i}, error=result.error or "unparseable verdict", kind=result.failure_kind)
    with pytest.raises(ValueError, match="kind: expected one of"):
        job.fail({"id": 4}, error="?", kind="retryable")
    assert job.close() == 3 and job.failed_by_kind == {"permanent": 1, "transient": 1, "unparseable": 1}
    permanent, transient, unparseable = capsys.readouterr().err.strip().splitlines()
    assert permanent.startswith("test: 1 item(s) failed with a permanent error, first: HTTP 400: too long")
    assert "a re-run fails the same way" in permanent and "re-run to retry" not in permanent
    assert "first: HTTP 503: busy" in transient and "re-run to retry them" in transient
    assert "no parseable answer" in unparseable and "may or may not" in unparseable
    assert "re-run to retry" not in unparseable
