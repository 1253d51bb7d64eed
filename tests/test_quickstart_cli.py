"""The quickstart's input checks (the full run takes minutes and is exercised by hand / docs)."""
from jaxwrite.cli import main


def test_missing_data_dir_says_what_to_do(tmp_path, capsys):
    assert main(["quickstart", "--data-dir", str(tmp_path / "nope"), "--workdir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert "lacks writingbench" in err and "jaxwrite data download" in err and "--data-dir" in err
