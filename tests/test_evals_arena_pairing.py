"""The arena counts and lists prompts only one model answered (issue 29, fault 7): they are never judged,
so the report and summary.json list them per model, and a run below the paired share is refused in one
line unless --allow-partial."""
import json

from chat_server_support import scripted_chat_server
from jaxwrite.cli import main
from jaxwrite.evals.arena import pairing


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def test_pairing_per_model():
    prompts = {i: f"p{i}" for i in range(6)}
    responses = {"a": {i: "x" for i in range(4)}, "b": {i: "y" for i in range(2, 6)}, "c": {0: "z", 9: "q"}}
    assert pairing(prompts, responses) == {"a": {"answered": 4, "paired": 3, "unpaired": [1]},
                                           "b": {"answered": 4, "paired": 2, "unpaired": [4, 5]},
                                           "c": {"answered": 1, "paired": 1, "unpaired": []}}


def test_unpaired_prompts_are_refused_or_judged_partially_and_listed(tmp_path, capsys):
    prompts = _write(tmp_path / "prompts.jsonl", [{"id": i, "prompt": f"write {i}"} for i in range(6)])
    a = _write(tmp_path / "a.jsonl", [{"id": i, "response": "aaaa"} for i in range(4)])          # prompts 0-3
    b = _write(tmp_path / "b.jsonl", [{"id": i, "response": "b"} for i in range(2, 6)])          # prompts 2-5
    out = tmp_path / "arena"
    with scripted_chat_server(lambda body: "[[A]]") as url:
        argv = ["eval", "arena", "--responses", a, b, "--prompts", prompts, "--judge", url, "--judge-model", "j",
                "--output", str(out), "--bootstrap", "10"]
        assert main(argv) == 2
        err = capsys.readouterr().err
        line, = [x for x in err.splitlines() if ": error: " in x]
        assert "'a' 2 of 4 (ids 0, 1)" in line and "'b' 2 of 4 (ids 4, 5)" in line and "--allow-partial" in line
        assert not out.exists()
        assert main(argv + ["--allow-partial"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["pairing"]["models"] == {"a": {"answered": 4, "paired": 2, "unpaired": [0, 1]},
                                            "b": {"answered": 4, "paired": 2, "unpaired": [4, 5]}}
    assert len((out / "verdicts.jsonl").read_text().splitlines()) == 4      # prompts 2 and 3, both orders
    report = (out / "report.md").read_text()
    assert "Pairing" in report and "| a | 4 | 2 | 2 | 0, 1 |" in report and "Unpaired prompts (not judged): a 2, b 2" in report
