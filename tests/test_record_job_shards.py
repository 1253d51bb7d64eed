"""Record jobs split across processes (generate, the evaluators): each process takes every count-th
input item into its own part file, the lead merges at the end, and re-runs (same count, another count,
or one process) never write a record twice. Processes are simulated: threads with a real barrier, or
runs one after another."""
import json
import threading

import pytest

from jaxwrite.common.record_job import ProcessShard, RecordJob, merge_parts, part_path


def _ids(path):
    return [json.loads(line)["id"] for line in path.read_text().splitlines() if line.strip()]


def _run(out, items, shard, fail_on=()):
    job = RecordJob(out, "id", desc="t", progress=False, shard=shard, failures=str(out) + ".failures.jsonl")
    for item in job.pending(items, id_of=lambda x: x):
        if item in fail_on:
            job.fail({"id": item, "error": "judge said no"})
        else:
            job.write({"id": item, "by": shard.index})
    return job.close()


def test_processes_split_by_input_position_and_the_lead_merges(tmp_path):
    out, items = tmp_path / "out.jsonl", list(range(10))
    barrier = threading.Barrier(3)
    results = {}

    def process(i):
        results[i] = _run(out, items, ProcessShard(i, 3, barrier.wait), fail_on=(4,))

    threads = [threading.Thread(target=process, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert results == {0: 0, 1: 1, 2: 0}                    # item 4 (4 % 3 == 1) failed on process 1
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == [i for i in items if i != 4]
    assert all(r["id"] % 3 == r["by"] for r in rows)         # each item went to one process, by position
    assert not list(tmp_path.glob("*.part-*"))               # merged and removed
    failures = [json.loads(line) for line in (tmp_path / "out.jsonl.failures.jsonl").read_text().splitlines()]
    assert [f["id"] for f in failures] == [4]
    # A re-run with the failed item fixed does only that item, once.
    barrier = threading.Barrier(3)
    threads = [threading.Thread(target=lambda i=i: _run(out, items, ProcessShard(i, 3, barrier.wait)))
               for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(_ids(out)) == items


def test_parts_left_by_a_killed_run_resume_under_another_count(tmp_path):
    out, items = tmp_path / "out.jsonl", list(range(12))
    # A 4-process run was killed before its merge: processes 0 and 2 wrote parts (one line cut short).
    with open(part_path(str(out), 0, 4), "w") as f:
        f.write(json.dumps({"id": 0}) + "\n" + json.dumps({"id": 4}) + "\n")
    with open(part_path(str(out), 2, 4), "w") as f:
        f.write(json.dumps({"id": 2}) + "\n" + '{"id": 6, "by"')
    # Resumed by 2 processes (run one after the other, no barrier: the lead last, so it merges everything).
    assert _run(out, items, ProcessShard(1, 2)) == 0
    assert _run(out, items, ProcessShard(0, 2)) == 0
    ids = _ids(out)
    assert sorted(ids) == items and len(ids) == len(set(ids))   # 6 was redone once; nothing twice
    assert not list(tmp_path.glob("*.part-*"))


def test_a_single_process_finishes_a_merge_a_kill_interrupted(tmp_path):
    out = tmp_path / "out.jsonl.gz"
    items = ["a", "b", "c", "d"]
    assert _run(out, items, ProcessShard(1, 2)) == 0           # process 1 wrote b, d; the lead never merged
    assert part_path(str(out), 1, 2).endswith(".part-00001-of-00002.gz")
    assert _run(out, items, ProcessShard()) == 0                # alone: merges the part first, then does a, c
    job = RecordJob(out, "id", desc="t", progress=False)
    assert sorted(rec["id"] for _, rec in job.records()) == items
    assert merge_parts(str(out), "id") == 0                     # nothing left to move


def test_pending_counts_only_this_process_share(tmp_path):
    job = RecordJob(tmp_path / "o.jsonl", "id", desc="t", progress=False, shard=ProcessShard(1, 4))
    assert job.pending(list(range(10)), id_of=lambda x: x) == [1, 5, 9] and job.total == 3
    with pytest.raises(Exception, match="unique"):
        RecordJob(tmp_path / "p.jsonl", "id", desc="t", progress=False,
                  shard=ProcessShard(0, 2)).pending([1, 2, 1], id_of=lambda x: x)   # dups refused in the whole input
