"""The quickstart's input checks (the full run takes minutes and is exercised by hand / docs; the
smallest mode runs from a fresh clone in tests/test_fresh_install.py)."""
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
