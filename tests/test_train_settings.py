"""Recipe settings as typed objects: every section of a recipe becomes a frozen, documented dataclass once,
at load; a misspelt key or a mistyped value fails there in one line naming `section.field`, and each
default exists once (the recipe groups are the dataclasses' defaults)."""
import dataclasses
import re

import pytest

from jaxwrite.cli import main as cli_main
from jaxwrite.common import InputError, load_config, recipe_names
from jaxwrite.common.settings import Settings
from jaxwrite.rl import LengthTaskConfig, RLConfig, rl_config
from jaxwrite.train import (DATA_KINDS, DistributedConfig, LoggingConfig, OptimizerConfig, TokenizerConfig,
                            TrainConfig, load_recipe)
from jaxwrite.train.defaults import base_config


@pytest.mark.parametrize("recipe,override,expected", [
    ("grpo_tiny", "--config.rl.sampels_every=3",
     r"unknown config key 'rl\.sampels_every' .*\(did you mean 'samples_every'\?\)"),
    ("grpo_tiny", "--config.rl.group_size=abc", r"field 'rl\.group_size': expected an integer, got 'abc'"),
    ("grpo_tiny", "--config.rl.group_size=0", r"field 'rl\.group_size': expected a positive integer, got 0"),
    ("grpo_tiny", "--config.rl.advantage=grpoo",
     r"field 'rl\.advantage': unknown advantage estimator 'grpoo' \(did you mean 'grpo'\?\); expected one of"),
    ("grpo_tiny", "--config.rl.rewards=('length', 'fromat')", r"field 'rl\.rewards': unknown reward 'fromat'"),
    ("grpo_tiny", "--config.rl.eps_high=abc", r"field 'rl\.eps_high': expected a number >= 0 or None, got 'abc'"),
    ("grpo_tiny", "--config.rl.length_task.zh_fraction=2", r"field 'rl\.length_task\.zh_fraction': expected a "
                                                           r"number in \[0, 1\], got 2\.0"),
    ("grpo_tiny", "--config.rl.reward_weights=(1.0,)", r"field 'rl\.reward_weights': 1 weights for 3 rewards"),
    ("cpt_tiny", "--config.data.batch_size=1.5", r"field 'data\.batch_size': expected an integer, got '1\.5'"),
    ("cpt_tiny", "--config.data.eval_holdout=3", r"field 'data\.eval_holdout': expected a tuple"),
    ("cpt_tiny", "--config.optimizer.b2=1.5", r"field 'optimizer\.b2': expected a number in \[0, 1\], got 1\.5"),
    ("cpt_tiny", "--config.logging.trackers=('mlflow',)", r"field 'logging\.trackers': unknown value 'mlflow'"),
    ("cpt_tiny", "--config.data.kind=wpb_pool", r"field 'data\.kind': objective 'lm' reads data of kind lm_corpus"),
    ("critic_sft_tiny", "--config.data.on_overlap=skip", r"field 'data\.on_overlap': unknown value 'skip'"),
    ("rm_tiny_degraded", "--config.data.degradations=('scramble', 'shufle')",
     r"field 'data\.degradations': unknown value 'shufle' \(did you mean 'shuffle'\?\)"),
])
def test_a_bad_key_or_value_fails_at_load_naming_the_field(recipe, override, expected):
    with pytest.raises(InputError) as err:
        load_recipe(recipe, [override])
    assert re.search(expected, str(err.value)) and "\n" not in str(err.value), str(err.value)


def test_the_cli_refuses_before_anything_runs(tmp_path, capsys):
    for override in ("--config.rl.sampels_every=3", "--config.rl.group_size=abc"):
        assert cli_main(["train", "--config", "grpo_tiny", "--workdir", str(tmp_path / "w"), override]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "rl." in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "w").exists()


RECIPE_TYPO = '''
from jaxwrite.rl.config import rl_config
from jaxwrite.train.defaults import base_config, lm_data, sft_data

def get_config():
    c = base_config()
    c.objective = "{objective}"
    {body}
    return c
'''


@pytest.mark.parametrize("objective,body,expected", [
    # A recipe file can add keys an override cannot: misspelt ones are refused at load all the same.
    ("grpo", "c.rl = rl_config(); c.rl.sampels_every = 3",
     r"field 'rl\.sampels_every': unknown key \(did you mean 'samples_every'\?\); rl has: "),
    ("sft", "c.data = dict(sft_data(64, 8).to_dict(), batch_size='8')",
     r"field 'data\.batch_size': expected a positive integer, got '8'"),
    ("sft", "c.data = sft_data(64, 8); c.data.pakc = False", r"field 'data\.pakc': unknown key \(did you mean"),
    ("sft", "c.optimizer = dict(c.optimizer.to_dict(), learning_rate='1e-3')",
     r"field 'optimizer\.learning_rate': expected a number >= 0, got '1e-3'"),
    ("lm", "c.data = lm_data(64, 8); c.rl = rl_config()", r"field 'rl': objective 'lm' reads no rl section"),
    ("sft", "pass", r"field 'data': missing"),
])
def test_a_recipe_file_with_a_bad_key_or_value_is_refused(tmp_path, objective, body, expected):
    path = tmp_path / "mine.py"
    path.write_text(RECIPE_TYPO.format(objective=objective, body=body))
    with pytest.raises(InputError) as err:
        load_recipe(str(path))
    assert re.search(expected, str(err.value)) and "\n" not in str(err.value), str(err.value)


@pytest.mark.parametrize("name", recipe_names())
def test_every_shipped_recipe_loads_typed_and_round_trips(name):
    config = load_recipe(name)
    assert isinstance(config, TrainConfig) and isinstance(config.optimizer, OptimizerConfig)
    assert (config.rl is not None) == (config.objective == "grpo")
    assert (config.data is None) == (config.objective == "grpo")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.num_steps = 3
    again = TrainConfig.from_mapping(config.to_dict())   # what run_config.json holds reads back the same
    assert again == config


def test_defaults_live_once_in_the_dataclasses():
    """The recipe groups are the dataclasses' defaults: a value set in neither place cannot differ."""
    assert rl_config().to_dict() == RLConfig().to_dict()
    assert RLConfig().samples_every == 10   # what RolloutStream now reads (it defaulted to 0 on its own before)
    base = base_config()
    for key, section in (("optimizer", OptimizerConfig), ("tokenizer", TokenizerConfig),
                         ("logging", LoggingConfig), ("distributed", DistributedConfig)):
        assert base[key].to_dict() == section().to_dict()
    # A data section that names no kind is the objective's first kind (bradley_terry: the WPB pool).
    pairs = load_config("rm_tiny")
    del pairs.data["kind"]
    assert TrainConfig.from_recipe(pairs).data.kind == "wpb_pool"


def test_every_setting_is_documented_and_listed_in_the_docstring():
    classes = [TrainConfig, OptimizerConfig, TokenizerConfig, LoggingConfig, DistributedConfig, RLConfig,
               LengthTaskConfig, *(DATA_KINDS.get(k) for k in DATA_KINDS.names())]
    for cls in classes:
        assert issubclass(cls, Settings)
        for name, doc in cls.documentation().items():
            assert doc, f"{cls.__name__}.{name} has no doc"
            assert f"{name}: {doc}" in cls.__doc__


def test_typed_values_are_converted_once_and_changes_are_checked_again():
    config = load_recipe("grpo_tiny", ["--config.rl.temperature=1", "--config.rl.eps_high=0.28"])
    assert config.rl.temperature == 1.0 and isinstance(config.rl.temperature, float)
    assert config.rl.reward_weights == (1.0, 0.25, 1.0) and config.mesh == (1, -1, 1)
    moved = config.updated({"model.init_from": "/p", "tokenizer.path": "/t", "rl.rm_path": "/rm"})
    assert (moved.model.init_from, moved.tokenizer.path, moved.rl.rm_path) == ("/p", "/t", "/rm")
    assert config.model.init_from == "" and config.rl.rm_path == ""       # the original is unchanged
    with pytest.raises(InputError, match=r"field 'rl\.group_size': expected a positive integer, got -1"):
        config.updated({"rl.group_size": -1})
    with pytest.raises(InputError, match=r"field 'model\.init_fro': unknown key \(did you mean 'init_from'\?\)"):
        config.updated({"model.init_fro": "/p"})
