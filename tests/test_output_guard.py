"""One writer per output, duplicates compacted, a full disk as one line (issue 29, faults 3 and 4):
`jaxwrite generate` refused in one line naming the PID of another process writing the same output; a
re-run compacts the duplicate ids two unlocked writers left; generate into a full filesystem (an injected
ENOSPC, and a real 12 KiB tmpfs where user namespaces allow one) ends in one line naming the output and
the space needed, and the re-run resumes to exactly the records of an uninterrupted run."""
import errno
import json
import os
import shutil
import subprocess
import sys

import pytest

import jaxwrite.common.jsonl as jsonl
from jaxwrite.cli import main as cli_main
from jaxwrite.common.record_job import ProcessShard, RecordJob

HOLD = """import sys
from jaxwrite.common.record_job import RecordJob
job = RecordJob(sys.argv[1], "id", desc="holder", progress=False)
job.write({"id": "p0", "response": "from the other run"})
print("holding", flush=True)
sys.stdin.read()
job.close()
"""


def _records(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    from jaxwrite.models import save_hf
    from test_infer_support import model, tokenizer_dir
    out = tmp_path_factory.mktemp("hf") / "tiny"
    save_hf(model(), str(out), tokenizer_dir=tokenizer_dir())
    return out


@pytest.fixture(scope="module")
def prompts(tmp_path_factory):
    path = tmp_path_factory.mktemp("in") / "prompts.jsonl"
    path.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"story number {i}"}) + "\n" for i in range(40)))
    return path


def _argv(hf_dir, prompts, out):
    return ["generate", "--model", str(hf_dir), "--input", str(prompts), "--output", str(out),
            "--max-new-tokens", "16", "--temperature", "1.0", "--seed", "5", "--max-batch", "8"]


@pytest.fixture(scope="module")
def reference(hf_dir, prompts, tmp_path_factory):
    out = tmp_path_factory.mktemp("ref") / "reference.jsonl"
    assert cli_main(_argv(hf_dir, prompts, out)) == 0
    return {r["id"]: r for r in _records(out)}


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if "error" in line]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def test_a_second_writer_is_refused_naming_the_first_ones_pid(hf_dir, prompts, tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env=dict(os.environ, PYTHONPATH=os.getcwd()))
    try:
        assert holder.stdout.readline().strip() == "holding"
        capsys.readouterr()
        assert cli_main(_argv(hf_dir, prompts, out)) == 2
        line = _one_error_line(capsys.readouterr().err)
        assert f"PID {holder.pid}" in line and str(out) in line
        assert _records(out) == [{"id": "p0", "response": "from the other run"}]   # untouched
        assert not (tmp_path / "out.jsonl.meta.json").exists()
    finally:
        holder.communicate("", timeout=60)
    assert holder.returncode == 0 and not (tmp_path / ".out.jsonl.lock").exists()   # released and removed
    assert cli_main(_argv(hf_dir, prompts, out)) == 0                                # the lock is gone
    assert sorted(r["id"] for r in _records(out)) == sorted(f"p{i}" for i in range(40))


def test_a_rerun_compacts_duplicate_ids_keeping_the_first(tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    rows = [{"id": i, "run": "a"} for i in range(4)] + [{"id": i, "run": "b"} for i in (1, 2)] + [{"id": 4, "run": "b"}]
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    job = RecordJob(out, "id", desc="t", progress=False)
    assert "2 duplicate record(s) of 2 id(s)" in capsys.readouterr().err
    assert job.pending(list(range(6))) == [5]
    job.write({"id": 5, "run": "c"})
    job.close()
    assert [(r["id"], r["run"]) for r in _records(out)] == [(0, "a"), (1, "a"), (2, "a"), (3, "a"), (4, "b"), (5, "c")]
    RecordJob(out, "id", desc="t", progress=False).close()
    assert capsys.readouterr().err == ""          # nothing left to compact


def test_a_lone_run_is_refused_while_a_split_run_writes_parts(tmp_path):
    out = tmp_path / "out.jsonl"
    part = RecordJob(out, "id", desc="t", progress=False, shard=ProcessShard(1, 2))
    code = "import sys; from jaxwrite.common.record_job import RecordJob; RecordJob(sys.argv[1], 'id', desc='t')"
    lone = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=os.getcwd()))
    assert lone.returncode != 0 and f"PID {os.getpid()}" in lone.stderr
    part.close()


class _FillingFile:
    """A file whose disk fills after `room` bytes: the write that crosses it is cut there (ENOSPC)."""

    def __init__(self, f, state):
        self._f, self._state = f, state

    def write(self, data):
        room = self._state["room"]
        if len(data) > room:
            self._f.write(data[:room])
            self._f.flush()
            self._state["room"] = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self._state["room"] -= len(data)
        return self._f.write(data)

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


def test_a_full_disk_is_one_line_and_the_rerun_resumes_exactly(hf_dir, prompts, reference, tmp_path, capsys,
                                                               monkeypatch):
    out = tmp_path / "out.jsonl"
    state = {"room": 700}
    real_open = open

    def filling_open(path, mode="r", *args, **kwargs):
        f = real_open(path, mode, *args, **kwargs)
        return _FillingFile(f, state) if os.fspath(path) == str(out) and "a" in mode else f

    monkeypatch.setattr(jsonl, "open", filling_open, raising=False)
    assert cli_main(_argv(hf_dir, prompts, out)) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert str(out) in line and "no space left" in line and "free" in line and "more for the" in line
    assert not out.read_bytes().endswith(b"\n")          # the cut record is there, half written
    monkeypatch.undo()
    assert cli_main(_argv(hf_dir, prompts, out)) == 0
    got = _records(out)
    assert sorted(r["id"] for r in got) == sorted(reference) and all(r == reference[r["id"]] for r in got)


def _can_mount_tmpfs(tmp_path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                            f"mount -t tmpfs -o size=4k tmpfs {tmp_path}"], capture_output=True)
    return probe.returncode == 0


def test_generate_into_a_full_tmpfs(hf_dir, prompts, reference, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    if not _can_mount_tmpfs(disk):
        pytest.skip("no user namespaces to mount a tmpfs in (the injected ENOSPC test covers the logic)")
    out, kept = disk / "out.jsonl", tmp_path / "out.jsonl"
    cli = " ".join(map(str, [sys.executable, "-m", "jaxwrite", *_argv(hf_dir, prompts, out)]))
    # A 12 KiB tmpfs (3 pages: the lock file, the metadata, 4 KiB of the 6 KiB output) in a mount namespace of
    # its own; what it held is copied out before it goes.
    script = f"mount -t tmpfs -o size=12k tmpfs {disk} && {cli}; rc=$?; cp {out} {kept}; exit $rc"
    run = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=os.getcwd()), timeout=600)
    assert run.returncode == 2, run.stderr[-2000:]
    line = _one_error_line(run.stderr)
    assert str(out) in line and "no space left" in line
    assert 0 < len(_records_whole(kept)) < len(reference)
    assert cli_main(_argv(hf_dir, prompts, kept)) == 0
    got = _records(kept)
    assert sorted(r["id"] for r in got) == sorted(reference) and all(r == reference[r["id"]] for r in got)


def _records_whole(path) -> list[dict]:
    """The whole records of an output a full disk cut (its last line may be half written)."""
    out = []
    for line in path.read_bytes().split(b"\n"):
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out
