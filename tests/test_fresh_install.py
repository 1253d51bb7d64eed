"""The README's first command on a fresh machine: a clone with nothing beside it, no network, no data.

The repository's files are copied alone into a temporary folder, installed into an environment that
has no jaxwrite (tests/fresh_env.py), and `jaxwrite quickstart --smallest` runs there on the sample
shipped inside the package, with no data directory given, found or downloadable.
"""
import json
import subprocess

import pytest

from fresh_env import REPO, bare_venv, clean_env, copy_repository, git_files, imported_from, pip_install


@pytest.mark.slow
def test_quickstart_runs_from_a_fresh_clone_on_the_embedded_sample(tmp_path):
    if git_files() is None:
        pytest.skip("not a git checkout: no list of the repository's files to copy")
    clone = copy_repository(tmp_path / "clone" / "jaxwrite")
    assert not (clone.parent / "shared").exists() and (clone / "jaxwrite" / "sample_data" / "README.md").is_file()
    bin_dir = bare_venv(tmp_path / "venv")
    env = clean_env(tmp_path / "home")
    assert imported_from(bin_dir, env) == ""   # jaxwrite is not installed there yet
    pip_install(bin_dir, clone, env)
    assert imported_from(bin_dir, env) == str(clone / "jaxwrite")   # the copy, not this checkout

    workdir = tmp_path / "qs"
    run = subprocess.run([str(bin_dir / "jaxwrite"), "quickstart", "--smallest", "--no-progress", "--workdir",
                          str(workdir)], cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=1500)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "embedded sample" in run.stderr
    report = (workdir / "report.md").read_text(encoding="utf-8")
    assert "## Run" in report and "the embedded sample" in report and "smallest" in report
    summary = json.loads((workdir / "summary.json").read_text(encoding="utf-8"))
    assert summary["embedded_sample"] is True and summary["mode"] == "smallest"
    assert summary["data_dir"] == str(clone / "jaxwrite" / "sample_data")
    # Every sampled query was generated and then either scored or counted as malformed (never dropped).
    extraction = summary["writingbench_answer_extraction"]
    assert summary["writingbench"]["count"] + extraction["malformed"] == 2
    assert summary["critic"]["parseable"] is not None and summary["critic"]["n_heldout"] > 0
    assert (workdir / "report.html").is_file()
    assert REPO != clone
