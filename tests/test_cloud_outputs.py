"""gs:// outputs for record jobs, `generate` and the evaluators, against the local fake bucket: written in a
staging folder, pushed every few records, at the end and on failure; a resume on another machine (another
staging folder) pulls the bucket's output first and skips its ids, writing nothing twice; several processes
push their parts and the lead merges them in the bucket."""
import json
import os
import threading

import pytest

from fake_bucket import bucket  # noqa: F401 - the fixture
from jaxwrite.common import InputError, RecordJob
from jaxwrite.common.record_job import ProcessShard
from jaxwrite.common.remote import StagedOutput


def _ids(path):
    return [json.loads(line)["id"] for line in path.read_text().splitlines() if line.strip()]


def test_a_bucket_output_resumes_elsewhere_after_a_kill_without_duplicates(bucket, tmp_path, monkeypatch):
    items = list(range(7))
    (bucket / "b" / "runs").mkdir(parents=True)
    (bucket / "b" / "runs" / "other.jsonl").write_text("{}\n")   # another output in the folder: left alone
    out = StagedOutput("gs://b/runs/o.jsonl").__enter__()   # killed below: never left, never closed
    job = RecordJob(out.path, "id", desc="t", progress=False, failures=out.path + ".errors.jsonl",
                    mirror=out.mirror, push_every=2)
    for item in job.pending(items, id_of=lambda x: x)[:5]:
        job.write({"id": item})
    remote = bucket / "b" / "runs" / "o.jsonl"
    assert _ids(remote) == [0, 1, 2, 3]                  # pushed every 2 records; the 5th was not yet
    monkeypatch.setenv("JAXWRITE_STAGING_DIR", str(tmp_path / "staging-b"))   # another machine
    with StagedOutput("gs://b/runs/o.jsonl") as again:
        job = RecordJob(again.path, "id", desc="t", progress=False, mirror=again.mirror)
        assert job.pending(items, id_of=lambda x: x) == [4, 5, 6] and job.resumed == 4
        for item in [4, 5, 6]:
            job.write({"id": item})
        assert job.close() == 0
    assert _ids(remote) == items
    # The first machine again: its stale staging copy (0..4) is dropped; the bucket's output is the truth.
    monkeypatch.setenv("JAXWRITE_STAGING_DIR", str(tmp_path / "staging-a"))
    with StagedOutput("gs://b/runs/o.jsonl") as third:
        assert RecordJob(third.path, "id", desc="t", progress=False,
                         mirror=third.mirror).pending(items, id_of=lambda x: x) == []
        assert sorted(os.listdir(third.mirror.local)) == ["o.jsonl"]
    assert _ids(remote) == items


def test_a_failure_pushes_what_was_written(bucket):
    with pytest.raises(RuntimeError, match="judge crashed"):
        with StagedOutput("gs://b/o.jsonl") as out:
            job = RecordJob(out.path, "id", desc="t", progress=False, mirror=out.mirror)
            for item in job.pending([1, 2, 3], id_of=lambda x: x):
                if item == 3:
                    raise RuntimeError("judge crashed")
                job.write({"id": item})
    assert _ids(bucket / "b" / "o.jsonl") == [1, 2]


def test_processes_push_parts_and_the_lead_merges_them_in_the_bucket(bucket):
    items, count = list(range(11)), 3
    barrier = threading.Barrier(count, timeout=60)
    seen, errors = {}, []

    def process(i):
        try:
            shard = ProcessShard(i, count, barrier.wait)
            with StagedOutput("gs://b/o.jsonl", tag=shard.tag) as out:
                job = RecordJob(out.path, "id", desc="t", progress=False, failures=out.path + ".errors.jsonl",
                                shard=shard, mirror=out.mirror)
                for item in job.pending(items, id_of=lambda x: x):
                    if item == 7:
                        job.fail({"id": item, "error": "no verdict"})
                    else:
                        job.write({"id": item, "by": i})
                job.close()
                seen[i] = sorted(rec["id"] for _, rec in job.records())   # every process reads the merged output
        except Exception as err:  # noqa: BLE001 - reported by the assertion below
            errors.append(err)

    threads = [threading.Thread(target=process, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    merged = [i for i in items if i != 7]
    assert sorted(_ids(bucket / "b" / "o.jsonl")) == merged and seen == {i: merged for i in range(count)}
    assert [json.loads(x)["id"] for x in (bucket / "b" / "o.jsonl.errors.jsonl").read_text().splitlines()] == [7]
    assert sorted(p.name for p in (bucket / "b").iterdir()) == ["o.jsonl", "o.jsonl.errors.jsonl"]   # no parts


def test_record_job_refuses_an_unstaged_bucket_path(bucket):
    with pytest.raises(InputError, match="does not stage bucket outputs"):
        RecordJob("gs://b/o.jsonl", "id", desc="t", progress=False)


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    from jaxwrite.models import save_hf
    from test_infer_support import model, tokenizer_dir

    path = tmp_path_factory.mktemp("hf") / "tiny"
    save_hf(model(), str(path), tokenizer_dir=tokenizer_dir())
    return path


def test_generate_to_a_bucket_resumes_after_a_failure_and_splits_across_processes(bucket, tmp_path, monkeypatch,
                                                                                   hf_dir):
    import jaxwrite.parallel
    from jaxwrite.cli import main

    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"index": i, "query": f"story {i}"}) + "\n" for i in range(1, 6)))
    args = ["generate", "--model", str(hf_dir), "--input", str(prompts), "--output", "gs://b/gen/out.jsonl",
            "--temperature", "0", "--max-new-tokens", "3"]
    written = []
    original = RecordJob.write

    def write_then_die(self, record, **kwargs):   # the run dies after its second response
        if len(written) == 2:
            raise RuntimeError("preempted")
        written.append(record["index"])
        original(self, record, **kwargs)

    monkeypatch.setattr(RecordJob, "write", write_then_die)
    with pytest.raises(RuntimeError, match="preempted"):
        main(args)
    remote = bucket / "b" / "gen" / "out.jsonl"
    first = [json.loads(x) for x in remote.read_text().splitlines()]
    assert [r["index"] for r in first] == written == [1, 2]           # pushed on the way out
    assert (bucket / "b" / "gen" / "out.jsonl.meta.json").exists()
    monkeypatch.setattr(RecordJob, "write", original)
    monkeypatch.setenv("JAXWRITE_STAGING_DIR", str(tmp_path / "staging-b"))   # resumed on another machine
    assert main(args) == 0
    rows = [json.loads(x) for x in remote.read_text().splitlines()]
    assert [r["index"] for r in rows] == [1, 2, 3, 4, 5] and rows[:2] == first
    # Two processes into another bucket output (process 1 first, then the lead, which merges in the bucket):
    # the same responses (seed = base seed + input line), no part left in the bucket.
    split = args[:6] + ["gs://b/gen2/out.jsonl"] + args[7:]
    for index in (1, 0):
        monkeypatch.setattr(jaxwrite.parallel, "process_shard", lambda cfg=None, i=index: ProcessShard(i, 2))
        assert main(split) == 0
    assert sorted(p.name for p in (bucket / "b" / "gen2").iterdir()) == ["out.jsonl", "out.jsonl.meta.json"]
    by_index = {r["index"]: r["response"] for r in rows}
    assert {r["index"]: r["response"] for r in map(json.loads, (bucket / "b" / "gen2" / "out.jsonl")
                                                  .read_text().splitlines())} == by_index


def test_longbench_write_report_in_a_bucket(bucket, data_dir, capsys):
    from jaxwrite.cli import main
    from jaxwrite.evals import load_longbench_write

    items = load_longbench_write(data_dir, "longwrite_ruler")[:3]
    responses = bucket.parent / "responses.jsonl"
    responses.write_text("".join(json.dumps({"index": it.index, "response": "word " * 50}) + "\n" for it in items))
    assert main(["eval", "longbench-write", "score", "--responses", str(responses), "--output", "gs://b/lbw",
                 "--data-dir", str(data_dir), "--benchmark", "longwrite_ruler"]) == 0
    printed = json.loads(capsys.readouterr().out)
    folder = bucket / "b" / "lbw"
    assert sorted(p.name for p in folder.iterdir()) == ["length_plot.png", "lengths.jsonl", "report.html",
                                                        "report.md", "summary.json"]
    assert json.loads((folder / "summary.json").read_text())["S_l"] == printed["S_l"] and printed["answered"] == 3


def test_writingbench_scores_and_report_in_a_bucket_across_processes(bucket, data_dir, monkeypatch, capsys):
    import jaxwrite.parallel
    from chat_server_support import scripted_chat_server
    from jaxwrite.cli import main

    responses = bucket.parent / "responses.jsonl"
    responses.write_text("".join(json.dumps({"index": i, "response": f"answer {i}"}) + "\n" for i in (10, 11, 12)))
    with scripted_chat_server(lambda body: '```json\n{"score": 8, "reason": "because"}\n```') as url:
        argv = ["eval", "writingbench", "score", "--responses", str(responses), "--judge", url,
                "--judge-model", "critic", "--output", "gs://b/wb/scores.jsonl", "--data-dir", str(data_dir),
                "--indices", "10", "11", "12", "--report-dir", "gs://b/wb/report"]
        for index in (1, 0):   # process 1 of 2 first (query 11), then the lead, which merges and reports
            monkeypatch.setattr(jaxwrite.parallel, "process_shard", lambda cfg=None, i=index: ProcessShard(i, 2))
            assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["runs"][0]["scores_path"] == "gs://b/wb/scores.jsonl"
    assert result["runs"][0]["aggregate"]["overall"] == 8.0 and result["runs"][0]["scored"] == 2
    folder = bucket / "b" / "wb"
    assert sorted(p.name for p in folder.iterdir()) == ["report", "scores.jsonl", "scores.jsonl.meta.json"]
    assert sorted(json.loads(x)["index"] for x in (folder / "scores.jsonl").read_text().splitlines()) == [10, 11, 12]
    assert json.loads((folder / "report" / "summary.json").read_text())["count"] == 3
    assert (folder / "report" / "report.html").exists()


def test_commands_without_bucket_outputs_refuse_them_in_one_line(tmp_path, capsys, monkeypatch):
    from jaxwrite.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["prep", "long-form", "--prompts", "p.jsonl", "--labels", "gs://b/labels.jsonl", "--output", "o.jsonl",
                 "--labeller", "http://127.0.0.1:1/v1", "--labeller-model", "m"]) == 2
    assert main(["quickstart", "--workdir", "gs://b/quick"]) == 2
    # `data criteria` is the same step as `prep criteria`: refused before its generator is built.
    assert main(["data", "criteria", "--queries", "q.jsonl", "--output", "o.jsonl", "--summary", "gs://b/s.json",
                 "--generator", "http://127.0.0.1:1/v1", "--generator-model", "m"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert "--labels: expected a local path" in err[0] and "--workdir: expected a local folder" in err[1]
    assert "--summary: expected a local path" in err[2]
    assert list(tmp_path.iterdir()) == []   # nothing written, no local folder named gs:
