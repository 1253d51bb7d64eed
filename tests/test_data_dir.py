"""The one data-dir rule: --data-dir, $JAXWRITE_DATA_DIR, the download folder, ../shared/data beside a
checkout, the embedded sample; and the one-line errors when none holds what a command needs."""
import pathlib

import pytest

from jaxwrite.cli import main
from jaxwrite.common import InputError
from jaxwrite.common import data_dir as dd

NEED = ("writingbench/benchmark_all.jsonl",)


@pytest.fixture
def nowhere(tmp_path, monkeypatch):
    """No env variable, an empty download folder, no checkout data: only the embedded sample is left."""
    monkeypatch.delenv(dd.DATA_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(dd, "checkout_data_dir", lambda: tmp_path / "no_checkout_data")
    return tmp_path


def _root(path: pathlib.Path, *files: str) -> pathlib.Path:
    for rel in files:
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text("{}\n")
    return path


def test_explicit_then_env_then_download_then_checkout_then_sample(nowhere, monkeypatch):
    explicit, env = _root(nowhere / "a", *NEED), _root(nowhere / "b", *NEED)
    download = _root(dd.download_dir(), *NEED)
    checkout = _root(nowhere / "no_checkout_data", *NEED)
    monkeypatch.setenv(dd.DATA_DIR_ENV, str(env))
    assert dd.find_data_dir(str(explicit), NEED) == explicit
    assert dd.find_data_dir(None, NEED) == env
    monkeypatch.delenv(dd.DATA_DIR_ENV)
    assert dd.find_data_dir(None, NEED) == download
    (download / NEED[0]).unlink()   # a download folder without this command's files is passed over
    assert dd.find_data_dir(None, NEED) == checkout
    (checkout / NEED[0]).unlink()
    assert dd.find_data_dir(None, NEED, sample_ok=True) == dd.sample_dir()


def test_the_sample_only_where_the_command_runs_on_it(nowhere, capsys, monkeypatch):
    monkeypatch.setattr(dd, "_told_sample", False)   # said once per process
    with pytest.raises(InputError) as err:
        dd.find_data_dir(None, NEED)
    msg = str(err.value)
    assert "\n" not in msg and NEED[0] in msg and "jaxwrite data download" in msg
    assert str(dd.download_dir()) in msg and "--data-dir sample" in msg and "$JAXWRITE_DATA_DIR not set" in msg
    assert dd.find_data_dir("sample", NEED) == dd.sample_dir()   # named on purpose: taken
    assert dd.find_data_dir(None, NEED, sample_ok=True) == dd.sample_dir()
    assert "embedded sample" in capsys.readouterr().err


def test_an_explicit_choice_is_refused_not_skipped(nowhere, monkeypatch):
    _root(dd.download_dir(), *NEED)
    with pytest.raises(InputError, match=r"lacks writingbench/benchmark_all.jsonl; fetch the data with "
                                         r"`jaxwrite data download`"):
        dd.find_data_dir(str(_root(nowhere / "partial", "corpus_en/pg11.txt")), NEED, sample_ok=True)
    monkeypatch.setenv(dd.DATA_DIR_ENV, str(nowhere / "missing"))
    with pytest.raises(InputError, match=r"data directory not found \(given by \$JAXWRITE_DATA_DIR\); this "
                                         r"command reads writingbench/benchmark_all.jsonl in it; fetch the data "
                                         r"with `jaxwrite data download`"):
        dd.find_data_dir(None, NEED, sample_ok=True)


def test_a_missing_data_dir_names_the_files_and_the_download(nowhere, capsys):
    rc = main(["train", "--config", "cpt_tiny", "--workdir", str(nowhere / "w"), "--data-dir",
               str(nowhere / "no_such_dir")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and str(nowhere / "no_such_dir") in err
    assert "data directory not found (given by --data-dir)" in err
    assert "reads corpus_en, corpus_zh, corpus_en/pg11.txt, corpus_zh/pg27166.txt in it" in err
    assert "`jaxwrite data download`" in err and str(dd.download_dir()) in err


def test_none_holds_the_files_even_the_sample(nowhere):
    with pytest.raises(InputError) as err:
        dd.find_data_dir(None, ("writingbench/not_a_file.json",), sample_ok=True)
    assert str(dd.sample_dir()) in str(err.value) and "--data-dir sample" not in str(err.value)


def test_the_sample_holds_what_the_quickstart_and_the_loaders_read():
    from jaxwrite.evals import load_longbench_write, load_writingbench
    from jaxwrite.evals.refinebench_data import load_refinebench
    from jaxwrite.quickstart.run import NEEDS
    root = dd.sample_dir()
    assert all((root / n).exists() for n in NEEDS)
    queries = load_writingbench(root)
    assert {q.lang for q in queries.values()} == {"en", "zh"} and sum(q.lang == "en" for q in queries.values()) >= 20
    assert len(load_longbench_write(root, "longbench_write")) == 120   # whole upstream files
    assert load_refinebench(root).problems
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    assert size < 2_000_000


def test_train_takes_data_dir_and_says_what_is_missing(nowhere, capsys):
    rc = main(["train", "--config", "cpt_tiny", "--workdir", str(nowhere / "w"), "--data-dir",
               str(_root(nowhere / "empty", "README.md"))])
    err = capsys.readouterr().err
    assert rc == 2 and "lacks corpus_en, corpus_zh, corpus_en/pg11.txt, corpus_zh/pg27166.txt" in err
    assert "given by --data-dir" in err and "jaxwrite data download" in err and len(err.strip().splitlines()) == 1


def test_eval_refuses_the_sample_by_default_and_names_the_download(nowhere, tmp_path, capsys):
    responses = _root(tmp_path / "r", "r.jsonl") / "r.jsonl"
    rc = main(["eval", "writingbench", "aggregate", "--scores", str(responses)])
    err = capsys.readouterr().err
    assert rc == 2 and "no data directory holds writingbench" in err and "jaxwrite data download" in err
