"""The trainer grows through hooks, and objectives are looked up by name (a typo fails in one line)."""
import json
import subprocess
import sys

import pytest

from jaxwrite.common import InputError, load_config
from jaxwrite.train import OBJECTIVES, StepInfo, train
from jaxwrite.train.hooks import Hook
from train_fixtures import REPO, subprocess_env, tiny_overrides, train_tokenizer, write_corpus


def test_hook_is_due_every_n_steps_and_at_the_last():
    hook = Hook(lambda info: None, every=3)
    assert [s for s in range(1, 8) if hook.due(s, 7)] == [3, 6, 7]
    with pytest.raises(ValueError, match="every=0"):
        Hook(lambda info: None, every=0)


def test_added_hook_runs_every_n_steps(tmp_path):
    data = write_corpus(tmp_path / "data", books=3, paragraphs=40)
    tok = train_tokenizer(data, tmp_path / "tok")
    config = load_config(str(REPO / "configs" / "cpt_tiny.py"),
                         tiny_overrides(data, tok, num_steps=7, log_every=2, checkpoint_every=7, eval_every=0))
    seen: list[StepInfo] = []
    assert train(config, str(tmp_path / "run"), hooks=[(seen.append, 3)]) == 0
    assert [info.step for info in seen] == [3, 6, 7]
    assert all(info.metrics["loss"] > 0 and info.tokens > 0 for info in seen)
    # The trainer's own hooks still logged every log_every steps and at the end, one row per step.
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [2, 4, 6, 7]
    assert all({"loss", "lr", "tokens_per_sec", "mfu"} <= set(r) for r in rows)


def test_unknown_objective_is_a_one_line_error_listing_the_known_names(tmp_path, capsys):
    with pytest.raises(InputError) as err:
        OBJECTIVES.get("grop")
    assert str(err.value) == ("field 'objective': unknown objective 'grop'; expected one of: "
                              "bradley_terry, critic_sft, grpo, lm, sft")
    from jaxwrite.cli import main
    rc = main(["train", "--config", str(REPO / "configs" / "cpt_tiny.py"), "--workdir", str(tmp_path),
               "--config.objective=grop"])
    err_lines = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err_lines) == 1 and "unknown objective 'grop'" in err_lines[0]


def test_grpo_is_found_without_train_importing_rl():
    code = ("import sys; from jaxwrite.train import OBJECTIVES; assert 'grpo' in OBJECTIVES; "
            "assert 'jaxwrite.rl' not in sys.modules; OBJECTIVES.get('grpo'); "
            "assert 'jaxwrite.rl.grpo' in sys.modules; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], env=subprocess_env(), capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
