"""Config files and `--config.KEY=VALUE` overrides."""
import json
import os

import pytest

from jaxwrite.common import InputError, load_config

CONFIG = '''
import ml_collections
def get_config():
    c = ml_collections.ConfigDict()
    c.num_steps = 10
    c.lr = 1e-3
    c.name = "x"
    c.use_bf16 = False
    c.mesh = (1, -1, 1)
    c.model = ml_collections.ConfigDict({"num_layers": 2})
    return c
'''


@pytest.fixture
def cfg_path(tmp_path):
    path = tmp_path / "cfg.py"
    path.write_text(CONFIG)
    return str(path)


def test_overrides_are_typed_by_existing_fields(cfg_path):
    cfg = load_config(cfg_path, ["--config.num_steps=40", "--config.lr=3e-4", "--config.name=run",
                                 "--config.use_bf16=true", "--config.mesh=(2,4,1)", "--config.model.num_layers=4"])
    assert (cfg.num_steps, cfg.lr, cfg.name, cfg.use_bf16, cfg.mesh, cfg.model.num_layers) == (
        40, 3e-4, "run", True, (2, 4, 1), 4)


@pytest.mark.parametrize("override,message", [
    ("--config.num_stepz=4", "unknown config key 'num_stepz'"),
    ("--config.model.layers=4", "unknown config key 'model.layers'"),
    ("--config.num_steps=abc", "field 'num_steps': expected an integer, got 'abc'"),
    ("--config.lr=abc", "field 'lr': expected a number, got 'abc'"),
    ("--config.num_steps=1.5", "expected an integer"),
    ("--config.use_bf16=maybe", "expected true or false"),
])
def test_bad_overrides_fail_with_one_line_errors(cfg_path, override, message):
    with pytest.raises(InputError, match=message):
        load_config(cfg_path, [override])


def test_missing_config_file():
    with pytest.raises(InputError, match="config file not found"):
        load_config("nope.py")


def test_append_jsonl_keeps_text_that_has_no_utf8_form(tmp_path):
    """Model output can parse to a lone surrogate (JSON "\\udcce"); the line is still written, exactly,
    and non-ASCII text stays readable in the usual lines."""
    from jaxwrite.common import append_jsonl, read_jsonl
    path = tmp_path / "out.jsonl"
    append_jsonl(path, {"id": 1, "reason": "caf\u00e9"})
    append_jsonl(path, {"id": 2, "reason": "bad \udcce char"})
    assert "café" in path.read_text(encoding="utf-8").splitlines()[0]
    assert [r["reason"] for _, r in read_jsonl(path)] == ["caf\u00e9", "bad \udcce char"]


def test_jsonl_lines_escape_unicode_line_separators(tmp_path):
    """Model text can hold U+0085, U+2028, U+2029, which json.dumps keeps raw and str.splitlines (and
    JavaScript) read as line breaks: written escaped, every reader sees one record per line."""
    from jaxwrite.common import append_jsonl, json_line, read_jsonl, write_jsonl
    text = "a\u0085b\u2028c\u2029d \u00e9\u4e2d"
    for write in (lambda p: [append_jsonl(p, {"id": i, "t": text}) for i in (1, 2)],
                  lambda p: write_jsonl(p, [{"id": i, "t": text} for i in (1, 2)])):
        path = tmp_path / f"{len(list(tmp_path.iterdir()))}.jsonl"
        write(path)
        lines = path.read_text(encoding="utf-8").splitlines()
        assert [json.loads(x)["t"] for x in lines] == [text, text]
        assert "\u00e9\u4e2d" in lines[0]   # other non-ASCII text stays as it is
        assert [r["t"] for _, r in read_jsonl(path)] == [text, text]
    assert json.loads(json_line({"t": text})) == {"t": text}


def test_shipped_recipes_load_by_name_from_any_cwd(tmp_path, monkeypatch):
    from jaxwrite.common import recipe_names
    monkeypatch.chdir(tmp_path)   # no configs/ here: the names resolve through the package
    assert {"grpo_tiny", "cpt_tiny", "rm_qwen2.5_72b"} <= set(recipe_names())
    by_name = load_config("cpt_tiny", ["--config.num_steps=7"])
    by_path = load_config("configs/cpt_tiny.py", ["--config.num_steps=7"])   # the README's spelling
    assert by_name.to_dict() == by_path.to_dict() and by_name.num_steps == 7
    assert load_config("rm_qwen2.5_72b:v5p-128").model.preset == load_config(
        "rm_qwen2.5_72b.py:v5p-128").model.preset


def test_a_target_for_a_recipe_without_targets_is_one_line(cfg_path, capsys):
    """get_config() without an argument: ':v5p-32' is refused in one line, not a TypeError traceback."""
    with pytest.raises(InputError, match="takes no target, so ':v5p-32' cannot be applied") as err:
        load_config(cfg_path + ":v5p-32")
    assert "\n" not in str(err.value)
    from jaxwrite.cli import main
    assert main(["train", "--config", cfg_path + ":v5p-32", "--workdir", "unused"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "takes no target" in lines[0], lines


@pytest.mark.parametrize("name", ["writer_sft_qwen2.5_7b", "writer_sft_llama3.1_8b"])
def test_writer_sft_recipes_take_their_targets(name):
    recipe = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs", name + ".py")
    default, v4, gpu = (load_config(f"{recipe}{t}") for t in ("", ":v4-32", ":gpu"))
    assert default.to_dict() == load_config(f"{recipe}:v5p-32").to_dict()
    assert (default.model.param_dtype, default.grad_accum_steps, v4.grad_accum_steps) == ("float32", 1, 2)
    assert v4.data.batch_size == gpu.data.batch_size == 64 and v4.data.seq_len == gpu.data.seq_len == 8192
    assert (gpu.model.param_dtype, gpu.grad_accum_steps) == ("bfloat16", 64)
    with pytest.raises(InputError, match="unknown hardware target 'v5p-64'; this recipe supports: v5p-32, v4-32, gpu"):
        load_config(f"{recipe}:v5p-64")


def test_unknown_recipe_name_lists_the_shipped_ones():
    with pytest.raises(InputError, match="shipped recipe name .*grpo_tiny") as err:
        load_config("grpo_tinny")
    assert "\n" not in str(err.value)


def test_an_install_ships_the_recipes(tmp_path):
    """A non-editable install must find the recipes the quickstart and GRPO setup load by name."""
    import os
    import subprocess
    import sys
    import shutil
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = tmp_path / "src"   # a copy, so the build leaves nothing in the checkout
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for part in ("jaxwrite", "data_pipelines", "configs"):
        shutil.copytree(os.path.join(repo, part), src / part, ignore=skip)
    shutil.copy(os.path.join(repo, "setup.py"), src / "setup.py")
    # setup.py's own build step lays out exactly what a wheel holds, without needing the `wheel`
    # package or network access for an isolated build.
    subprocess.run([sys.executable, "setup.py", "-q", "build", "--build-lib", str(tmp_path / "lib")],
                   cwd=src, check=True, capture_output=True)
    names = {os.path.relpath(os.path.join(folder, f), tmp_path / "lib").replace(os.sep, "/")
             for folder, _, files in os.walk(tmp_path / "lib") for f in files}
    shipped = {f for f in os.listdir(os.path.join(repo, "configs")) if f.endswith(".py")}
    assert {"jaxwrite/recipes/" + f for f in shipped} <= names
