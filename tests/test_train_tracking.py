"""Experiment tracking beside metrics.jsonl: a W&B logger (against a fake `wandb` module, no network)
that gets the same numbers and continues its run on resume, a jax.profiler trace window, GRPO rollout
samples a person can read, and one-line errors for an unknown backend, a missing wandb, a bad window."""
import json
import sys
import types

import pytest

from jaxwrite.common import InputError, load_config
from jaxwrite.train import load_recipe, train
from train_fixtures import REPO, tiny_overrides, train_tokenizer, write_corpus


class FakeRun:
    def __init__(self, calls, kwargs):
        self.calls, self.kwargs = calls, kwargs

    def log(self, data, step=None):
        self.calls.append(("log", step, dict(data)))

    def finish(self):
        self.calls.append(("finish",))


@pytest.fixture()
def fake_wandb(monkeypatch):
    """A stand-in `wandb` module recording what jaxwrite sends it."""
    calls = []
    module = types.ModuleType("wandb")
    module.util = types.SimpleNamespace(generate_id=lambda: "run0001")

    def init(**kwargs):
        calls.append(("init", kwargs))
        return FakeRun(calls, kwargs)

    module.init = init
    monkeypatch.setitem(sys.modules, "wandb", module)
    return calls


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("track")
    data = write_corpus(root / "data", books=3, paragraphs=40)
    return data, train_tokenizer(data, root / "tok")


def _config(corpus, **extra):
    data, tok = corpus
    values = {"num_steps": 3, "log_every": 1, "checkpoint_every": 3, "eval_every": 0, **extra}
    return load_config(str(REPO / "configs" / "cpt_tiny.py"), tiny_overrides(data, tok, **values))


def _rows(workdir):
    return [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]


def test_wandb_gets_what_metrics_jsonl_gets_and_resumes_its_run(corpus, fake_wandb, tmp_path):
    run = tmp_path / "run"
    config = _config(corpus, **{"logging.wandb_project": "jw-test", "logging.wandb_mode": "offline",
                                "profile_steps": "2,3"})
    assert train(config, str(run)) == 0
    inits = [c[1] for c in fake_wandb if c[0] == "init"]
    assert len(inits) == 1 and inits[0]["project"] == "jw-test" and inits[0]["mode"] == "offline"
    assert inits[0]["id"] == "run0001" and inits[0]["resume"] == "allow" and inits[0]["dir"] == str(run)
    assert inits[0]["config"]["model"]["num_layers"] == 1          # the run's whole config travels with it
    logged = {step: data for kind, step, *rest in [c for c in fake_wandb if c[0] == "log"] for data in rest}
    rows = _rows(run)
    assert sorted(logged) == [r["step"] for r in rows] == [1, 2, 3]
    for r in rows:
        assert logged[r["step"]]["loss"] == pytest.approx(r["loss"]) and "tokens_per_sec" in logged[r["step"]]
    assert fake_wandb[-1] == ("finish",)
    # TensorBoard still gets its events, and the trace window wrote a profile beside them.
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    traces = list((run / "tensorboard" / "plugins" / "profile").glob("*/*.xplane.pb"))
    assert len(traces) == 1

    fake_wandb.clear()
    resumed = _config(corpus, **{"logging.wandb_project": "jw-test", "num_steps": 4})
    assert train(resumed, str(run)) == 0
    inits = [c[1] for c in fake_wandb if c[0] == "init"]
    assert inits[0]["id"] == "run0001"                              # the same W&B run continues
    assert [c[1] for c in fake_wandb if c[0] == "log"] == [4]
    # No window asked for this time: no new trace.
    assert list((run / "tensorboard" / "plugins" / "profile").glob("*/*.xplane.pb")) == traces


def test_profile_window_values():
    cfg = load_recipe("cpt_tiny", [])
    assert cfg.profile_window is None
    assert cfg.replace(profile_steps="5,8").profile_window == (5, 8)
    assert load_recipe("cpt_tiny", ["--config.profile_steps=7"]).profile_window == (7, 7)
    for bad in ("8,5", "0,2", "a,b", "1,2,3"):
        with pytest.raises(InputError) as err:   # refused when the recipe is loaded
            load_recipe("cpt_tiny", [f"--config.profile_steps={bad}"])
        assert "profile_steps" in str(err.value) and "\n" not in str(err.value)


def test_unknown_backend_and_missing_wandb_are_one_line(monkeypatch, tmp_path):
    with pytest.raises(InputError) as err:
        load_recipe("cpt_tiny", ["--config.logging.trackers=('tensorboard', 'mlflow')"])
    assert str(err.value) == ("field 'logging.trackers': unknown value 'mlflow'; expected one of: "
                              "tensorboard, wandb")
    monkeypatch.setitem(sys.modules, "wandb", None)   # import wandb now raises ImportError
    cfg = load_config("cpt_tiny", ["--config.logging.wandb_project=p"])
    with pytest.raises(InputError) as err:
        train(cfg, str(tmp_path / "never"))            # refused before anything is built
    assert "pip install 'jaxwrite[wandb]'" in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "never").exists()
    with pytest.raises(InputError, match="needs a project"):
        load_recipe("cpt_tiny", ["--config.logging.trackers=('wandb',)"])
