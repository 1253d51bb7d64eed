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


def _accelerator_of(name: str, devices: dict[str, list[str]], vendors: list[str], nvidia_smi: bool):
    """The first cell's accelerator(), run against a fake /dev and /sys (the functions before pip_install)."""
    import io
    import types
    book = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8"))
    setup = "".join(next(c for c in book["cells"] if c["cell_type"] == "code")["source"])
    code = setup[setup.index("def google_pci"):setup.index("def pip_install")]
    files = {f"/sys/bus/pci/devices/0000:00:0{i}.0/vendor": v for i, v in enumerate(vendors)}
    listing = {**devices, "/sys/bus/pci/devices/*/vendor": list(files)}
    fake_glob = types.SimpleNamespace(glob=lambda pattern: listing.get(pattern, []))
    fake_os = types.SimpleNamespace(environ={}, path=os.path)
    fake_shutil = types.SimpleNamespace(which=lambda cmd: "/usr/bin/nvidia-smi" if nvidia_smi else None)
    namespace = {"glob": fake_glob, "os": fake_os, "shutil": fake_shutil,
                 "open": lambda path: io.StringIO(files[path] + "\n")}
    exec(code, namespace)
    return namespace["accelerator"]()


@pytest.mark.parametrize("name", ["quickstart", "score_writingbench", "grpo_small"])
def test_first_cell_finds_tpus_by_accel_and_by_vfio(name):
    accel, vfio = {"/dev/accel*": ["/dev/accel0"]}, {"/dev/vfio/[0-9]*": ["/dev/vfio/0", "/dev/vfio/1"]}
    assert _accelerator_of(name, accel, [], nvidia_smi=False) == "tpu"                      # v4, v5p
    assert _accelerator_of(name, vfio, ["0x8086", "0x1ae0"], nvidia_smi=False) == "tpu"     # v5e, v6e
    assert _accelerator_of(name, vfio, ["0x10de"], nvidia_smi=True) == "gpu"                # VFIO, not a TPU
    assert _accelerator_of(name, {}, ["0x1ae0"], nvidia_smi=False) == "cpu"                 # no chips exposed
