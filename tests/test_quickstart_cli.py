"""The quickstart's input checks (the full run takes minutes and is exercised by hand / docs; the
smallest mode runs from a fresh clone in tests/test_fresh_install.py), and the real-model mode at its
smallest."""
import pytest

from jaxwrite.cli import main


def test_missing_data_dir_says_what_to_do(tmp_path, capsys):
    assert main(["quickstart", "--data-dir", str(tmp_path / "nope"), "--workdir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert "data directory not found" in err and "jaxwrite data download" in err and "--data-dir" in err
    assert "reads writingbench/benchmark_all.jsonl" in err   # the files it needs, as a partial data dir's error names


def test_data_dir_without_the_files_names_them(tmp_path, capsys):
    (tmp_path / "d" / "writingbench").mkdir(parents=True)
    assert main(["quickstart", "--data-dir", str(tmp_path / "d"), "--workdir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err.strip()
    assert "lacks writingbench/benchmark_all.jsonl" in err and "corpus_zh/pg27166.txt" in err
    assert len(err.splitlines()) == 1 and "jaxwrite data download" in err


def test_unknown_model_names_the_known_ones(tmp_path, capsys):
    assert main(["quickstart", "--model", "gpt-9", "--workdir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--model 'gpt-9'" in err and "smollm2" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "w").exists()   # refused before anything runs


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_smallest_run_from_the_real_model_writes_the_report(smollm2_gguf, data_dir, tmp_path):
    """`--model smollm2 --smallest`: the real-weights path end to end (warm-up, RM and GRPO from the pinned
    model, generation, the instruct model as judge) at its least work; its figures are not results."""
    import json

    work = tmp_path / "qs"
    assert main(["quickstart", "--model", "smollm2", "--smallest", "--no-progress", "--data-dir", str(data_dir),
                 "--workdir", str(work)]) == 0
    summary = json.loads((work / "summary.json").read_text())
    assert summary["model"] == "smollm2" and summary["critic"] is None
    assert "writingpreferencebench" not in summary["reward_model"]
    assert "smollm2 instruct model" in json.dumps(summary["writingbench_judge"])
    run_config = json.loads((work / "grpo" / "policy_init" / "run_config.json").read_text())
    assert "smollm2-135m-instruct" in run_config["model"]["init_from"].lower()   # warmed up from the real weights
    report = (work / "report.md").read_text()
    assert "Protocol warm-up" in report and "Not part of a --model run" in report
