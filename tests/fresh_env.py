"""What a new user has after `git clone`: the repository's files alone in a temporary folder (nothing
beside it, so no ../shared/data), and a Python environment in which jaxwrite is not installed.

The environment is a venv that sees this interpreter's site-packages as plain path entries (a `.pth`
line each): the installed libraries (jax, flax, ...) import, but the `.pth` hooks inside those folders
do not run, so an editable jaxwrite installed there (a developer's checkout) stays invisible. Installing
needs no network: `pip install --no-deps --no-build-isolation` with the build tools already present.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import site
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
# Variables that would point the fresh environment back at this checkout or its data.
_LEAKS = ("PYTHONPATH", "JAXWRITE_DATA_DIR", "XLA_FLAGS", "VIRTUAL_ENV", "PYTHONHOME")


def git_files() -> list[str] | None:
    """The repository's files (committed, plus new ones git does not ignore); None outside a git checkout."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                             capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return [f for f in out.decode().split("\0") if f and (REPO / f).is_file()]


def copy_repository(dest: pathlib.Path) -> pathlib.Path:
    """The checkout's files copied to `dest` (which must not exist), as a clone would have them."""
    for rel in git_files() or []:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, target)
    return dest


def bare_venv(dest: pathlib.Path) -> pathlib.Path:
    """A venv without jaxwrite (see the module docstring); returns its bin/ folder."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(dest)], check=True)
    bin_dir = dest / "bin"
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    purelib = subprocess.run([str(bin_dir / "python"), "-c", code],
                             capture_output=True, text=True, check=True).stdout.strip()
    paths = [p for p in site.getsitepackages() + [site.getusersitepackages()] if os.path.isdir(p)]
    pathlib.Path(purelib, "_parent_site_packages.pth").write_text("".join(p + "\n" for p in paths))
    return bin_dir


def clean_env(home: pathlib.Path, **extra: str) -> dict[str, str]:
    """os.environ without the variables that lead back here; the download folder under `home`."""
    env = {k: v for k, v in os.environ.items() if k not in _LEAKS}
    # pip reads a relative PIP_CONSTRAINT against its own working directory, which here is another folder.
    if env.get("PIP_CONSTRAINT") and os.path.exists(env["PIP_CONSTRAINT"]):
        env["PIP_CONSTRAINT"] = os.path.abspath(env["PIP_CONSTRAINT"])
    env.update(XDG_CACHE_HOME=str(home / ".cache"), JAX_PLATFORMS="cpu", **extra)
    return env


def pip_install(bin_dir: pathlib.Path, source: pathlib.Path, env: dict[str, str]) -> None:
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--disable-pip-version-check", "--no-index", "-e", str(source)], check=True, env=env,
                   cwd=str(source))


def imported_from(bin_dir: pathlib.Path, env: dict[str, str]) -> str:
    """Where the environment's `import jaxwrite` comes from ("" when it does not import)."""
    code = "import jaxwrite, os; print(os.path.dirname(jaxwrite.__file__))"
    # Run from the venv folder: `python -c` puts the working directory first on sys.path.
    out = subprocess.run([str(bin_dir / "python"), "-c", code], cwd=str(bin_dir.parent),
                         capture_output=True, text=True, env=env)
    return out.stdout.strip() if out.returncode == 0 else ""
