"""Odd work directories and output folders, and recipes that raise, are one line (issue 29, faults 5 and 6):
a --workdir / --output-dir / convert DST that is a regular file, and any output path under a file
(`FILE/sub`), for every command that takes one; a folder --output that is a file when the command makes
it; a recipe whose get_config raises shows the recipe's own file:line and message, and the traceback
only with --debug or JAXWRITE_DEBUG=1."""
import json

import pytest

from jaxwrite.cli import main as cli_main


def _error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert len(lines) == 1, err
    return lines[0]


# Each command that writes a folder or a file, with its other arguments as few as it needs to reach the check.
COMMANDS = [
    ["train", "--config", "cpt_tiny", "--workdir", "{out}"],
    ["quickstart", "--workdir", "{out}"],
    ["compile", "--config", "cpt_tiny", "--json", "{out}/report.json"],
    ["convert", "{inp}", "{out}"],
    ["tokenizer", "train", "--input", "{inp}", "--output", "{out}", "--vocab-size", "300"],
    ["generate", "--model", "{inp}", "--input", "{inp}", "--output", "{out}/o.jsonl"],
    ["eval", "writingbench", "score", "--responses", "{inp}", "--judge", "http://127.0.0.1:9", "--judge-model",
     "m", "--output", "{out}/s.jsonl"],
    ["eval", "writingbench", "report", "--scores", "{inp}", "--output", "{out}"],
    ["eval", "longbench-write", "score", "--responses", "{inp}", "--output", "{out}"],
    ["eval", "arena", "--responses", "{inp}", "{inp}", "--prompts", "{inp}", "--judge", "http://127.0.0.1:9",
     "--judge-model", "m", "--output", "{out}"],
    ["eval", "refinebench", "--model", "http://127.0.0.1:9", "--model-name", "m", "--judge",
     "http://127.0.0.1:9", "--judge-model", "m", "--output", "{out}"],
    ["eval", "agreement", "--judge", "http://127.0.0.1:9", "--judge-model", "m", "--output", "{out}"],
    ["data", "download", "--output", "{out}"],
    ["data", "critic-data", "--verdicts", "{inp}", "--output-dir", "{out}"],
    ["prep", "criteria", "--queries", "{inp}", "--generator", "http://127.0.0.1:9", "--output", "{out}/c.jsonl"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_an_output_under_a_file_is_one_line(tmp_path, capsys, argv):
    blocker = tmp_path / "FILE"
    blocker.write_text("not a folder\n")
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"index": 1, "response": "a"}) + "\n")
    out = blocker / "sub"
    assert cli_main([a.format(inp=inp, out=out) for a in argv]) == 2
    line = _error_line(capsys)
    assert str(blocker) in line and "is a file" in line


@pytest.mark.parametrize("argv", [
    ["train", "--config", "cpt_tiny", "--workdir", "{file}"],
    ["quickstart", "--workdir", "{file}"],
    ["data", "critic-data", "--verdicts", "{file}", "--output-dir", "{file}"],
    ["eval", "longbench-write", "score", "--responses", "{responses}", "--output", "{file}"],
], ids=lambda a: " ".join(a[:2]))
def test_a_folder_that_is_a_file_is_one_line(tmp_path, capsys, argv):
    file = tmp_path / "FILE"
    file.write_text("not a folder\n")
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"index": 1, "response": "a"}) + "\n")
    assert cli_main([a.format(file=file, responses=responses) for a in argv]) == 2
    line = _error_line(capsys)
    assert str(file.name) in line and "expected a folder, found a file" in line


RECIPE = '''import ml_collections


def helper():
    return undefined_setting + 1


def get_config():
    cfg = ml_collections.ConfigDict()
    cfg.steps = helper()
    return cfg
'''


def test_a_recipe_that_raises_is_its_own_file_line_and_message(tmp_path, capsys, monkeypatch):
    recipe = tmp_path / "my_recipe.py"
    recipe.write_text(RECIPE)
    argv = ["train", "--config", str(recipe), "--workdir", str(tmp_path / "w")]
    assert cli_main(argv) == 2
    line = _error_line(capsys)
    assert f"{recipe}:5: the recipe raised NameError: name 'undefined_setting' is not defined" in line
    # The user's traceback on --debug (anywhere on the line) or JAXWRITE_DEBUG=1, the line still last.
    for extra, env in ((["--debug"], None), ([], "1")):
        if env:
            monkeypatch.setenv("JAXWRITE_DEBUG", env)
        assert cli_main(argv + extra) == 2
        err = capsys.readouterr().err
        assert "Traceback" in err and "undefined_setting + 1" in err and err.strip().splitlines()[-1] == line


def test_a_recipe_that_raises_on_import(tmp_path, capsys):
    recipe = tmp_path / "broken.py"
    recipe.write_text("import ml_collections\n\nSTEPS = {'a': 1}['b']\n")
    assert cli_main(["train", "--config", str(recipe), "--workdir", str(tmp_path / "w")]) == 2
    assert f"{recipe}:3: the recipe raised KeyError: 'b'" in _error_line(capsys)


@pytest.mark.parametrize("command", ["generate", "serve"])
def test_a_model_dir_without_weights_says_what_a_model_dir_holds(tmp_path, capsys, command):
    from jaxwrite.checkpoint.model_dir import write_model_config
    from jaxwrite.models import get_preset
    empty, hf, ours = tmp_path / "empty", tmp_path / "hf", tmp_path / "ours"
    for folder in (empty, hf, ours):
        folder.mkdir()
    (hf / "config.json").write_text("{}")
    (hf / "pytorch_model.bin").write_bytes(b"")
    write_model_config(str(ours), get_preset("tiny"))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": 1, "prompt": "a"}\n')
    extra = ["--input", str(prompts), "--output", str(tmp_path / "o.jsonl")] if command == "generate" else []
    for folder, why in ((empty, "not a model"), (hf, "no *.safetensors weights beside config.json"),
                        (ours, "model_config.json here but no weights")):
        assert cli_main([command, "--model", str(folder), *extra]) == 2
        line = _error_line(capsys)
        assert why in line and "expected a Hugging Face config.json (+ *.safetensors) here, jaxwrite's" in line
