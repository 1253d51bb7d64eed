"""The Colab / Kaggle notebooks run end to end on CPU, each in a fresh kernel started from an environment
that has no jaxwrite (tests/fresh_env.py): their first cell installs it, here from a copy of this
checkout ($JAXWRITE_REPO_URL, the notebooks' REPO_URL override), and their data cell finds the
sample shipped inside the package (no data directory is set or beside the copy)."""
import json
import os

import pytest

from fresh_env import REPO, bare_venv, clean_env, copy_repository, git_files

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = REPO / "notebooks"


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    if git_files() is None:
        pytest.skip("not a git checkout: no list of the repository's files to copy")
    return copy_repository(tmp_path_factory.mktemp("notebooks") / "jaxwrite")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["quickstart", "score_writingbench", "grpo_small"])
def test_notebook_executes_in_a_fresh_environment(name, clone, tmp_path, monkeypatch):
    bin_dir = bare_venv(tmp_path / "venv")
    spec = tmp_path / "jupyter" / "kernels" / "fresh"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [str(bin_dir / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "fresh environment", "language": "python"}))
    # The kernel inherits this process's environment: the same one a new user has (one CPU device, no
    # data dir, an empty download folder), plus where to install jaxwrite from and the kernel spec.
    env = clean_env(tmp_path / "home", JAXWRITE_REPO_URL=str(clone), JUPYTER_PATH=str(tmp_path / "jupyter"))
    for key in [k for k in os.environ if k not in env]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)

    book = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    client = nbclient.NotebookClient(book, timeout=600, kernel_name="fresh",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [o for c in book.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    printed = "".join(o.get("text", "") for c in book.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert f"jaxwrite from {clone / 'jaxwrite'}" in printed   # installed by the first cell, from the copy
    assert f"data: {clone / 'jaxwrite' / 'sample_data'}" in printed
