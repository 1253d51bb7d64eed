"""Does this worker keep its own JAX? Run on every TPU VM worker by `launch.py install`, before pip:

    python3 tpu/keep_jax.py CONSTRAINTS [--setup-py PATH]

Exit 0: this interpreter has a TPU JAX (libtpu importable) whose jax and jaxlib lie in the range
jaxwrite's setup.py declares; CONSTRAINTS is written pinning both to the installed versions, so
`pip install -e . -c CONSTRAINTS` keeps them (pip fails loudly rather than swap them). Exit 1: no such JAX
(none installed, no libtpu, or outside the range); install the `tpu` extra instead. Reads package
metadata only: importing jax would start the TPU runtime.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import pathlib
import re
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def declared_range(setup_py: pathlib.Path) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(lowest, first excluded) release of the core requirement `"jax>=A,<B"` in setup.py."""
    match = re.search(r'"jax>=([\d.]+),<([\d.]+)"', setup_py.read_text(encoding="utf-8"))
    if match is None:
        raise SystemExit(f"keep_jax.py: {setup_py} declares no \"jax>=A,<B\" requirement")
    return release(match.group(1)), release(match.group(2))


def release(version: str) -> tuple[int, ...]:
    """The leading numeric fields: '0.11.0rc1' -> (0, 11, 0), '0.10.2.dev20250101' -> (0, 10, 2)."""
    match = re.match(r"\d+(?:\.\d+)*", version)
    return tuple(int(x) for x in match.group().split(".")) if match else ()


def installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def has_libtpu() -> bool:
    """The TPU runtime JAX loads (a plain `pip install jax` has none: that JAX would run on the CPU)."""
    return importlib.util.find_spec("libtpu") is not None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="keep_jax.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("constraints", help="pip constraints file to write when the installed JAX is kept")
    parser.add_argument("--setup-py", default=str(REPO_ROOT / "setup.py"))
    args = parser.parse_args(argv)
    low, high = declared_range(pathlib.Path(args.setup_py))
    wanted = f">={'.'.join(map(str, low))},<{'.'.join(map(str, high))}"
    versions = {name: installed(name) for name in ("jax", "jaxlib")}
    found = ", ".join(f"{n} {v or 'absent'}" for n, v in versions.items())
    if not has_libtpu():
        print(f"keep_jax: no libtpu here ({found}): installing jaxwrite[tpu] (jax{wanted})", flush=True)
        return 1
    if not all(v and low <= release(v) < high for v in versions.values()):
        print(f"keep_jax: {found} is outside jaxwrite's jax{wanted}: installing jaxwrite[tpu]", flush=True)
        return 1
    pathlib.Path(args.constraints).write_text("".join(f"{n}=={v}\n" for n, v in versions.items()), encoding="utf-8")
    print(f"keep_jax: keeping this image's TPU JAX ({found}; jaxwrite takes jax{wanted})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
