"""benchmarks/device_check.py, the first accelerator's checklist (issue 26 §7), runs on a CPU too: at small
shapes with Pallas in the interpreter, saying so, and writes its JSON (machine + per-check figures) and the
Markdown table. One check here (the log-prob kernels against the chunked path) keeps it short; the whole
script takes ~5 min on 2 cores."""
import json
import subprocess
import sys

from train_fixtures import REPO, subprocess_env


def test_device_check_runs_a_check_on_cpu_and_reports_it(tmp_path):
    env = subprocess_env()
    env.pop("XLA_FLAGS", None)   # one CPU device, as a user runs the script
    out = tmp_path / "check.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "device_check.py"), "--only", "logprobs",
                           "--out", str(out)], env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "no accelerator here" in proc.stderr and "interpreter" in proc.stderr
    report = json.loads(out.read_text())
    assert report["machine"]["platform"] == "cpu" and report["small_shapes"] is True
    check = report["checks"]["logprobs"]
    assert check["ok"] is True and set(check["errors"]) == {"logp", "entropy", "dh", "dw"}
    assert check["pallas"]["tokens_per_s"] > 0 and check["chunked"]["tokens_per_s"] > 0
    assert "| logprobs | chunked |" in proc.stdout
