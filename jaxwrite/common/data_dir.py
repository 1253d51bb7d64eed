"""The one rule every command uses to find its data root (the folder holding writingbench/, corpus_en/, ...).

In order:
  1. `--data-dir DIR` (or `config.data_dir` for `train`); the word `sample` names the embedded sample;
  2. `$JAXWRITE_DATA_DIR`;
  3. the folder `jaxwrite data download` fills by default (`$XDG_CACHE_HOME/jaxwrite/data`, else
     `~/.cache/jaxwrite/data`);
  4. `../shared/data` beside a source checkout (this project's own layout, which CI relies on);
  5. the sample shipped inside the package (jaxwrite/sample_data), for the commands that can run on it
     (quickstart, train, notebooks, tests; LongBench-Write, whose files it holds whole).
An explicit choice (1, 2) is used or refused, never skipped; the defaults (3-5) are taken in order, the
first one holding every file the command needs. The error names the files, the places and the download.
"""
from __future__ import annotations

import os
import pathlib
import sys
from typing import Iterable

from jaxwrite.common.errors import InputError

DATA_DIR_ENV = "JAXWRITE_DATA_DIR"
SAMPLE = "sample"   # `--data-dir sample`: the embedded sample, chosen on purpose
DOWNLOAD_HINT = "jaxwrite data download"
_PACKAGE = pathlib.Path(__file__).resolve().parents[1]   # .../jaxwrite
_told_sample = False


def download_dir() -> pathlib.Path:
    """Where `jaxwrite data download` writes when given no --output."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(cache) / "jaxwrite" / "data"


def sample_dir() -> pathlib.Path:
    """The data sample shipped inside the package (its README lists each file's source and licence)."""
    return _PACKAGE / "sample_data"


def checkout_data_dir() -> pathlib.Path | None:
    """`../shared/data` beside a source checkout (a folder with setup.py above the package), else None."""
    repo = _PACKAGE.parent
    if not (repo / "setup.py").is_file():
        return None   # an installed copy: site-packages/../shared means nothing
    return repo.parent / "shared" / "data"


def is_sample(path: str | os.PathLike) -> bool:
    return pathlib.Path(path).resolve() == sample_dir().resolve()


def _missing(root: pathlib.Path, needs: tuple[str, ...]) -> list[str]:
    return [n for n in needs if not (root / n).exists()]


def _announce_sample() -> None:
    global _told_sample
    if not _told_sample:
        _told_sample = True
        print(f"data: jaxwrite's embedded sample ({sample_dir()}): a few items of each data set, enough to try "
              f"every step; `{DOWNLOAD_HINT}` fetches the full data", file=sys.stderr)


def find_data_dir(data_dir: str | os.PathLike | None = None, needs: Iterable[str] = (), *,
                  sample_ok: bool = False, flag: str = "--data-dir") -> pathlib.Path:
    """The data root for a command that reads `needs` (paths relative to the root: files or folders).

    `sample_ok`: the command runs meaningfully on the embedded sample (it is then the last default).
    `flag`: how this command's explicit choice is spelled in messages (`--config.data_dir` for train).
    """
    needs = tuple(needs)
    what = ", ".join(needs) or "a data root"
    fetch = (f"fetch the data with `{DOWNLOAD_HINT}` (it writes {download_dir()}) or pass {flag} DIR, "
             f"a folder holding them")
    explicit, origin = data_dir, flag
    if explicit in (None, ""):
        explicit, origin = os.environ.get(DATA_DIR_ENV), "$" + DATA_DIR_ENV
    if explicit:
        root = sample_dir() if str(explicit) == SAMPLE else pathlib.Path(explicit).expanduser().absolute()
        if not root.is_dir():
            raise InputError(f"data directory not found (given by {origin}); this command reads {what} in it; "
                             f"{fetch}", path=str(root))
        missing = _missing(root, needs)
        if missing:
            raise InputError(f"data directory (given by {origin}) lacks {', '.join(missing)}; {fetch}",
                             path=str(root))
        return root
    places = [download_dir()]
    checkout = checkout_data_dir()
    if checkout is not None:
        places.append(checkout)
    for root in places:
        if root.is_dir() and not _missing(root, needs):
            return root
    if not _missing(sample_dir(), needs):
        if sample_ok:
            _announce_sample()
            return sample_dir()
        fetch += f" (the embedded sample has them but is too small for this command's figures: {flag} {SAMPLE})"
    looked = "; ".join(str(p) for p in places + ([sample_dir()] if sample_ok else []))
    raise InputError(f"no data directory holds {what} (looked in: {flag} not given, ${DATA_DIR_ENV} not set, "
                     f"{looked}); {fetch}")


# Benchmarks the embedded sample holds whole (its upstream files unchanged), so a score computed on it
# is the real one; for the others it holds a few items, too few for a benchmark figure, so an evaluator
# takes the sample only when asked by name (`--data-dir sample`).
WHOLE_IN_SAMPLE = ("longbench_write",)


def benchmark_dir(data_dir: str | os.PathLike | None, benchmark: str) -> pathlib.Path:
    """A benchmark's folder `<root>/<benchmark>` (writingbench, refinebench, ...) by the one rule, with a
    one-line error when no data root holds it."""
    return find_data_dir(data_dir, (benchmark,), sample_ok=benchmark in WHOLE_IN_SAMPLE) / benchmark


DATA_DIR_HELP = ("(default: $JAXWRITE_DATA_DIR, else what `jaxwrite data download` wrote, else ../shared/data "
                 "beside a checkout; `sample`: the embedded sample)")
