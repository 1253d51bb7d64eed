"""`eval arena`, `eval agreement` and `eval refinebench` split their work across processes: each judges its
share into a part file, the lead merges the parts and writes the report, and the result is the one a single
process gets. Processes are simulated as threads with a real barrier (each sees its own ProcessShard), against
the scripted OpenAI-compatible server on 127.0.0.1; one run writes to the fake gs:// bucket."""
import json
import threading

import pytest

from chat_server_support import scripted_chat_server
from fake_bucket import bucket  # noqa: F401 - the fixture
from jaxwrite.cli import main
from jaxwrite.common.record_job import ProcessShard, RecordJob
from test_evals_arena_cli import _answer


@pytest.fixture(scope="module")
def server_url():
    with scripted_chat_server(lambda body: _answer(body["messages"])) as url:
        yield url


def _as_processes(monkeypatch, count, argv):
    """Runs `jaxwrite ARGV` as `count` processes at once; returns {process index: exit code}."""
    import jaxwrite.parallel

    mine = threading.local()
    monkeypatch.setattr(jaxwrite.parallel, "process_shard", lambda cfg=None: mine.shard)
    barrier = threading.Barrier(count, timeout=120)
    codes, errors = {}, []

    def process(i):
        mine.shard = ProcessShard(i, count, barrier.wait)
        try:
            codes[i] = main(argv)
        except Exception as err:  # noqa: BLE001 - reported by the assertion below
            errors.append(err)
            barrier.abort()

    threads = [threading.Thread(target=process, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    return codes


@pytest.fixture()
def writers(monkeypatch):
    """{process index: keys of the records it wrote} (which process judged what)."""
    seen, original = {}, RecordJob.write

    def write(self, record, **kwargs):
        seen.setdefault(self.shard.index, []).append(record["key"])
        original(self, record, **kwargs)

    monkeypatch.setattr(RecordJob, "write", write)
    return seen


def _alone(monkeypatch, argv):
    import jaxwrite.parallel

    monkeypatch.setattr(jaxwrite.parallel, "process_shard", lambda cfg=None: ProcessShard())
    return main(argv)


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _without_parts(folder):
    return not [p for p in folder.iterdir() if ".part-" in p.name]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _arena_argv(tmp_path, server_url, out):
    prompts = _write(tmp_path / "prompts.jsonl", [{"id": i, "prompt": f"write {i}"} for i in range(5)])
    short = _write(tmp_path / "short.jsonl", [{"id": i, "response": "s" * (1 + i % 2)} for i in range(5)])
    long = _write(tmp_path / "long.jsonl", [{"id": i, "response": "l" * 10} for i in range(5)])
    mid = _write(tmp_path / "mid.jsonl", [{"id": i, "response": "unparseable" if i == 0 else "mmmmm"}
                                          for i in range(5)])
    return ["eval", "arena", "--responses", short, long, mid, "--prompts", prompts, "--judge", server_url,
            "--judge-model", "fake", "--output", str(out), "--bootstrap", "30"]


def _same_summary(a, b, keys):
    return {k: a[k] for k in keys} == {k: b[k] for k in keys}


def test_arena_judges_across_processes_like_one(tmp_path, server_url, monkeypatch, writers):
    split, alone = tmp_path / "split", tmp_path / "alone"
    assert _as_processes(monkeypatch, 3, _arena_argv(tmp_path, server_url, split)) == {0: 0, 1: 0, 2: 0}
    assert sorted(len(keys) for keys in writers.values()) == [10, 10, 10]   # each judged a third
    writers.clear()
    assert _alone(monkeypatch, _arena_argv(tmp_path, server_url, alone)) == 0
    rows = _rows(split / "verdicts.jsonl")
    assert len(rows) == 30 == len({r["key"] for r in rows}) and _without_parts(split)
    assert sorted(rows, key=lambda r: r["key"]) == sorted(_rows(alone / "verdicts.jsonl"), key=lambda r: r["key"])
    one, many = (json.loads((d / "summary.json").read_text()) for d in (alone, split))
    assert _same_summary(one, many, ("elo", "ci95", "n_battles", "n_invalid", "win_rate", "position_bias"))
    assert (split / "report.html").exists() and (split / "elo.png").exists()
    # Re-run by 2 processes: everything is done, nothing judged or written twice.
    assert _as_processes(monkeypatch, 2, _arena_argv(tmp_path, server_url, split)) == {0: 0, 1: 0}
    assert len(_rows(split / "verdicts.jsonl")) == 30


def test_arena_across_processes_into_a_bucket(tmp_path, server_url, monkeypatch, bucket):
    assert _as_processes(monkeypatch, 2, _arena_argv(tmp_path, server_url, "gs://b/arena")) == {0: 0, 1: 0}
    folder = bucket / "b" / "arena"
    assert sorted(p.name for p in folder.iterdir()) == ["elo.png", "length_bias.png", "report.html", "report.md",
                                                        "samples.html", "summary.json", "verdicts.jsonl"]
    assert len({r["key"] for r in _rows(folder / "verdicts.jsonl")}) == len(_rows(folder / "verdicts.jsonl")) == 30
    assert json.loads((folder / "summary.json").read_text())["n_battles"] == 26


def test_agreement_judges_across_processes_like_one(tmp_path, server_url, monkeypatch, data_dir):
    def argv(out):
        return ["eval", "agreement", "--judge", server_url, "--judge-model", "j", "--output", str(out),
                "--data-dir", str(data_dir), "--max-pairs", "6", "--bootstrap", "20"]

    split, alone = tmp_path / "split", tmp_path / "alone"
    assert _as_processes(monkeypatch, 2, argv(split)) == {0: 0, 1: 0}
    assert _alone(monkeypatch, argv(alone)) == 0
    rows = _rows(split / "verdicts.jsonl")
    assert len(rows) == 12 == len({r["key"] for r in rows}) and _without_parts(split)
    one, many = (json.loads((d / "summary.json").read_text()) for d in (alone, split))
    assert _same_summary(one, many, ("n_pairs", "human_labels", "judge_vs_human", "length_baseline_vs_human"))


def test_refinebench_runs_problems_across_processes_like_one(tmp_path, server_url, monkeypatch, data_dir,
                                                             writers):
    def argv(out):
        return ["eval", "refinebench", "--model", server_url, "--model-name", "m", "--judge", server_url,
                "--judge-model", "j", "--mode", "guided", "--turns", "3", "--output", str(out),
                "--data-dir", str(data_dir), "--limit", "5"]

    split, alone = tmp_path / "split", tmp_path / "alone"
    assert _as_processes(monkeypatch, 3, argv(split)) == {0: 0, 1: 0, 2: 0}
    problems = sorted({key.split("#")[0] for keys in writers.values() for key in keys})
    # Each process ran every 3rd problem, all of its turns.
    assert {i: sorted({k.split("#")[0] for k in keys}) for i, keys in writers.items()} == \
        {i: problems[i::3] for i in range(3)}
    assert _alone(monkeypatch, argv(alone)) == 0
    rows = _rows(split / "turns.jsonl")
    assert len(rows) == 10 == len({r["key"] for r in rows}) and _without_parts(split)   # 5 problems x 2 turns
    one, many = (json.loads((d / "summary.json").read_text()) for d in (alone, split))
    assert _same_summary(one, many, ("n_problems", "overall", "stop_reasons", "by_field"))
    assert many["overall"]["pass"] == [0.0, 100.0, 100.0]
