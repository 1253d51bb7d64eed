"""Exact resume: a run killed with SIGKILL, then stopped with SIGTERM, then resumed, logs the same losses
as an uninterrupted run; SIGTERM saves a checkpoint and exits 0."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from train_fixtures import REPO, subprocess_env, tiny_overrides, train_tokenizer, write_corpus

NUM_STEPS, EVERY = 100, 20


def _losses(workdir):
    out = {}
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        for line in f:
            rec = json.loads(line)
            if "loss" in rec:
                assert rec["step"] not in out, f"step {rec['step']} logged twice"
                out[rec["step"]] = (rec["loss"], rec["grad_norm"])
    return out


def _wait_for(predicate, proc, what):
    while not predicate():
        if proc.poll() is not None:
            pytest.fail(f"training finished (rc {proc.returncode}) before {what}; "
                        "the machine is too fast or too loaded for this margin")
        time.sleep(0.02)


def _committed_steps(workdir):
    root = os.path.join(workdir, "checkpoints")
    return sorted(int(n) for n in os.listdir(root) if n.isdigit()) if os.path.isdir(root) else []


def test_killed_then_preempted_run_matches_uninterrupted(tmp_path):
    from jaxwrite.common import load_config
    from jaxwrite.train import train

    data = write_corpus(tmp_path / "data")
    tok = train_tokenizer(data, tmp_path / "tok")
    overrides = tiny_overrides(data, tok, num_steps=NUM_STEPS, checkpoint_every=EVERY, log_every=1,
                               eval_every=0)
    config_path = str(REPO / "configs" / "cpt_tiny.py")

    reference = str(tmp_path / "reference")
    assert train(load_config(config_path, overrides), reference) == 0

    resumed = str(tmp_path / "resumed")
    cmd = [sys.executable, "-m", "jaxwrite", "train", "--config", config_path, "--workdir", resumed, *overrides]
    killed = subprocess.Popen(cmd, env=subprocess_env(), stderr=subprocess.DEVNULL)
    _wait_for(lambda: _committed_steps(resumed), killed, "the first checkpoint")
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    first = _committed_steps(resumed)[-1]
    assert first < NUM_STEPS

    preempted = subprocess.Popen(cmd, env=subprocess_env(), stderr=subprocess.PIPE, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(preempted.stderr), daemon=True)
    reader.start()
    # The trainer prints this after restoring (its SIGTERM handler is installed before that).
    _wait_for(lambda: any("resumed from step" in line for line in lines), preempted, "it resumed")
    preempted.send_signal(signal.SIGTERM)
    preempted.wait()
    reader.join()
    err = "".join(lines)
    assert preempted.returncode == 0, err
    assert "SIGTERM: saved step" in err
    saved = _committed_steps(resumed)[-1]
    assert first < saved < NUM_STEPS
    assert max(_losses(resumed)) == saved   # stopped at the step boundary it saved

    assert train(load_config(config_path, overrides), resumed) == 0
    want, got = _losses(reference), _losses(resumed)
    assert sorted(got) == list(range(1, NUM_STEPS + 1))
    for step in want:
        assert abs(got[step][0] - want[step][0]) <= 1e-6, (step, got[step], want[step])
        assert abs(got[step][1] - want[step][1]) <= 1e-5, (step, got[step], want[step])
