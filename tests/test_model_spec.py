"""One way to name a model (`jaxwrite.chat.resolve`): each SPEC form, the one-line refusals, and the same
flags for every role of every command."""
import pytest

from jaxwrite.chat import HttpChatModel
from jaxwrite.chat.resolve import local_model_spec, model_spec, open_chat_model
from jaxwrite.cli import build_parser
from jaxwrite.cli import main as cli_main
from jaxwrite.common import InputError


def _local(**kwargs):
    """Stands in for the in-process model: what it would be built from."""
    return kwargs


def test_each_spec_form(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    gguf = tmp_path / "tiny-q8_0.gguf"
    gguf.write_bytes(b"GGUF")
    url = model_spec("https://judge.example/v1", "--judge")
    assert url.kind == "url" and url.is_url
    assert model_spec(str(folder), "--critic").kind == "dir"
    assert model_spec("Qwen/Qwen2.5-7B-Instruct@main", "--teacher").kind == "hub"   # nothing fetched yet
    found = model_spec(str(gguf), "--model")
    # a GGUF file goes to the loader as given: no directory is asked for
    assert found.kind == "gguf" and found.local_path() == str(gguf)
    assert open_chat_model(found, concurrency=3, local=_local) == {"model": str(gguf), "max_batch": 3,
                                                                   "name": str(gguf)}
    assert open_chat_model(model_spec(str(folder)), name="critic", local=_local)["name"] == "critic"
    client = open_chat_model(url, name="served", concurrency=5)
    assert isinstance(client, HttpChatModel) and client.model == "served" and client.concurrency == 5


@pytest.mark.parametrize("spec, message", [
    ("", "--judge: expected an http(s):// URL, a local model directory, a .gguf file or a Hugging Face hub id"),
    ("no such thing", "no such thing: --judge: expected an http(s):// URL, a local model directory"),
    ("missing.gguf", "missing.gguf: --judge: expected an existing .gguf file"),
    ("ftp://judge.example/v1", "ftp://judge.example/v1: --judge: expected an http(s):// URL"),
])
def test_a_bad_spec_is_one_line(spec, message):
    with pytest.raises(InputError) as err:
        model_spec(spec, "--judge")
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_endpoint_refusals_name_the_flags(monkeypatch):
    with pytest.raises(InputError, match=r"^--judge http://127.0.0.1:1/v1: expected --judge-model NAME"):
        open_chat_model(model_spec("http://127.0.0.1:1/v1", "--judge"))
    with pytest.raises(InputError, match="^--model http://127.0.0.1:1/v1: expected --model-name NAME"):
        open_chat_model(model_spec("http://127.0.0.1:1/v1", "--model"), name_flag="--model-name")
    monkeypatch.setenv("JW_KEY", "secret")
    with pytest.raises(InputError, match="--critic-api-key-env JW_KEY: refusing to send an API key over plain http "
                                         "to judge.example; use https, or pass --critic-allow-plain-http"):
        open_chat_model(model_spec("http://judge.example/v1", "--critic"), name="m", api_key_env="JW_KEY")
    with pytest.raises(InputError, match="^--critic-api-key-env JW_UNSET: the environment variable is not set"):
        open_chat_model(model_spec("https://judge.example/v1", "--critic"), name="m", api_key_env="JW_UNSET")
    with pytest.raises(InputError, match="this command runs the model in process"):
        local_model_spec("http://127.0.0.1:1/v1", "--model")


ROLES = {("eval", "writingbench", "score"): ["judge"], ("eval", "longbench-write", "score"): ["judge"],
         ("eval", "arena"): ["judge"], ("eval", "agreement"): ["judge"], ("eval", "refinebench"): ["model", "judge"],
         ("prep", "criteria"): ["generator"], ("data", "criteria"): ["generator"], ("prep", "responses"): ["teacher"],
         ("prep", "critic-score"): ["critic"], ("prep", "long-form"): ["labeller"]}


def _subparser(parser, path):
    for name in path:
        action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
        parser = action.choices[name]
    return parser


def test_every_role_takes_the_same_flags():
    parser = build_parser()
    for path, roles in ROLES.items():
        flags = {opt for action in _subparser(parser, path)._actions for opt in action.option_strings}
        for role in roles:
            name = "--model-name" if role == "model" else f"--{role}-model"
            wanted = {f"--{role}", name, f"--{role}-api-key-env", f"--{role}-allow-plain-http", f"--{role}-concurrency"}
            assert wanted <= flags, (path, role, wanted - flags)
            assert (f"--{role}-mode" in flags) == (role == "judge"), (path, role)
        # the forms this issue removed stay removed
        assert not {"--judge-url", "--judge-model-dir", "--model-url", "--model-model-dir", "--strip-think",
                    "--no-strip-think", "--concurrency", "--max-batch"} & flags, path
        if path[-1] in ("score", "arena", "critic-score"):
            assert "--answer-extraction" in flags, path


def test_commands_refuse_a_bad_spec_in_one_line(tmp_path, capsys):
    assert cli_main(["eval", "arena", "--responses", "a.jsonl", "b.jsonl", "--prompts", "p.jsonl",
                     "--output", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.strip().endswith("expected --judge SPEC: an http(s):// URL, a local model "
                                                    "directory, a .gguf file or a Hugging Face hub id "
                                                    "(ORG/NAME[@REVISION])")
    assert cli_main(["generate", "--model", "http://127.0.0.1:1/v1", "--input", "i.jsonl",
                     "--output", str(tmp_path / "o.jsonl")]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "--model http://127.0.0.1:1/v1: expected a local model" in line
