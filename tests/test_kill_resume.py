"""Long jobs killed and resumed lose nothing and repeat nothing (issue 17 item 5): `jaxwrite generate`
and `eval writingbench score` run in a subprocess, are killed (SIGKILL) mid-run, their output is then
damaged the way a kill mid-write leaves it (a last record cut in half; a last record whose newline was
not written), and the re-run gives exactly the input's record set, each record once, with the same
content an uninterrupted run gives; scoring re-asks the judge exactly for what was lost."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from jaxwrite.cli import main as cli_main
from test_evals_judge_http import OpenAIStub

CLI = [sys.executable, "-c", "import sys; from jaxwrite.cli import main; sys.exit(main())"]


def _records(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _kill_when(cmd: list[str], output, lines: int, timeout_s: float = 300) -> None:
    """Runs `cmd` and SIGKILLs it once `output` holds `lines` lines (or it ends by itself)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.path.dirname(__file__)]))
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + timeout_s
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if output.exists() and output.read_bytes().count(b"\n") >= lines:
                break
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait()


def _damage(output, complete_last_without_newline: bool) -> int:
    """Leaves the output as a kill mid-write would; returns how many whole records survive."""
    data = output.read_bytes()
    lines = data.splitlines(keepends=True)
    if complete_last_without_newline:
        output.write_bytes(data.rstrip(b"\n"))                  # the last record lacks only its newline
        return len(lines)
    output.write_bytes(b"".join(lines[:-1]) + lines[-1][:len(lines[-1]) // 2])   # the last one cut in half
    return len(lines) - 1


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    from jaxwrite.models import save_hf
    from test_infer_support import model, tokenizer_dir
    out = tmp_path_factory.mktemp("hf") / "tiny"
    save_hf(model(), str(out), tokenizer_dir=tokenizer_dir())
    return out


def test_generate_killed_and_resumed_gives_exact_records(hf_dir, tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"story number {i}"}) + "\n" for i in range(12)))
    argv = ["generate", "--model", str(hf_dir), "--input", str(prompts), "--max-new-tokens", "24",
            "--temperature", "1.0", "--seed", "3", "--max-batch", "2"]
    reference = tmp_path / "reference.jsonl"
    assert cli_main(argv + ["--output", str(reference)]) == 0
    want = {r["id"]: r for r in _records(reference)}
    out = tmp_path / "out.jsonl"
    _kill_when(CLI + argv + ["--output", str(out)], out, 2)
    _damage(out, complete_last_without_newline=False)
    assert cli_main(argv + ["--output", str(out)]) == 0
    got = _records(out)
    assert sorted(r["id"] for r in got) == sorted(want)                                # each once, none lost
    assert all(r == want[r["id"]] for r in got)                                         # same seeds, same text
    # A kill after the last record but before its newline: the record is kept, nothing is redone.
    _damage(out, complete_last_without_newline=True)
    assert cli_main(argv + ["--output", str(out)]) == 0
    assert _records(out) == got


def test_writingbench_scoring_killed_and_resumed_asks_exactly_what_was_lost(tmp_path, data_dir):
    indices = list(range(1, 9))
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps({"index": i, "response": f"Answer {i}."}) + "\n" for i in indices))

    def slow_verdict(content):
        time.sleep(0.05)               # slow enough that the kill lands mid-run
        return '```json\n{"score": 7, "reason": "fine"}\n```'

    out = tmp_path / "scores.jsonl"
    with OpenAIStub(answer=slow_verdict) as judge:
        argv = ["eval", "writingbench", "score", "--responses", str(responses), "--judge", judge.url,
                "--judge-model", "critic", "--output", str(out), "--data-dir", str(data_dir), "--indices",
                *map(str, indices), "--judge-concurrency", "2",
                "--no-cache"]   # the resume alone: the call cache would also spare a lost query's answered calls
        _kill_when(CLI + argv, out, 2)
        survived = _damage(out, False)
        calls_before = len(judge.calls)
        assert cli_main(argv) == 0
        calls_after = len(judge.calls) - calls_before
    got = _records(out)
    assert sorted(r["index"] for r in got) == indices                                   # each query once
    assert all(len(r["scores"]) == 5 and all(v[0]["score"] == 7 for v in r["scores"].values()) for r in got)
    assert calls_after == 5 * (len(indices) - survived)                                 # only the lost ones
