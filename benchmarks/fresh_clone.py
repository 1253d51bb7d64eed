"""Time from a fresh clone to the quickstart's report, as a new user meets it: `git clone` into an empty
folder (nothing beside it), an environment without jaxwrite, `pip install -e .`, `jaxwrite quickstart`.

    python benchmarks/fresh_clone.py [--smallest] [--workdir DIR]

No network here, so the install is `pip install --no-deps --no-build-isolation -e .` into a venv that
sees this interpreter's libraries (tests/fresh_env.py, the same set-up the fresh-install test uses): the
figure covers cloning, installing jaxwrite itself and the whole quickstart, not downloading JAX and the
other dependencies (a user's pip cache decides that part). The quickstart finds no data directory and
runs on the embedded sample. Reports each phase's seconds, the machine's cores and its load average
before and after (the machine may be shared). The last line is JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from fresh_env import bare_venv, clean_env, imported_from, pip_install  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smallest", action="store_true", help="time `jaxwrite quickstart --smallest`")
    p.add_argument("--workdir", default=None, help="scratch folder (default: a new temporary one)")
    args = p.parse_args()
    root = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="jaxwrite_fresh_"))
    root.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    load_before = os.getloadavg()

    def phase(name, fn):
        start = time.perf_counter()
        out = fn()
        seconds[name] = round(time.perf_counter() - start, 1)
        print(f"{name}: {seconds[name]} s", file=sys.stderr)
        return out

    clone = root / "clone" / "jaxwrite"
    phase("git_clone", lambda: subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True))
    env = clean_env(root / "home")
    bin_dir = phase("venv", lambda: bare_venv(root / "venv"))
    phase("pip_install", lambda: pip_install(bin_dir, clone, env))
    assert imported_from(bin_dir, env) == str(clone / "jaxwrite")
    cmd = [str(bin_dir / "jaxwrite"), "quickstart", "--no-progress", "--workdir", str(root / "quickstart")]
    cmd += ["--smallest"] if args.smallest else []
    phase("quickstart", lambda: subprocess.run(cmd, cwd=str(root), env=env, check=True,
                                                stdout=subprocess.DEVNULL))
    report = root / "quickstart" / "report.md"
    summary = json.loads((root / "quickstart" / "summary.json").read_text())
    print(json.dumps({"mode": "smallest" if args.smallest else "default", "report": str(report),
                      "report_exists": report.is_file(), "seconds": seconds,
                      "total_seconds": round(sum(seconds.values()), 1),
                      "quickstart_stage_seconds": summary.get("stage_seconds"), "cpu_count": os.cpu_count(),
                      "load_average_before": [round(x, 2) for x in load_before],
                      "load_average_after": [round(x, 2) for x in os.getloadavg()],
                      "commit": subprocess.run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"],
                                               capture_output=True, text=True).stdout.strip()}))


if __name__ == "__main__":
    main()
