"""The Colab / Kaggle notebooks run end to end on CPU at their tiny settings."""
import pathlib

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[1] / "notebooks"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["quickstart", "score_writingbench", "grpo_small"])
def test_notebook_executes(name, data_dir, monkeypatch):
    # The kernel sees one CPU device, as a user's notebook does (not the suite's 8 simulated ones).
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.setenv("JAXWRITE_DATA_DIR", str(data_dir))
    book = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    client = nbclient.NotebookClient(book, timeout=900, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
    errors = [o for c in book.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
