"""Hub model ids (`--model ORG/NAME`, model.init_from, tokenizer.path) resolve through huggingface_hub to
a snapshot of the hub cache, offline, against a cache folder laid out as the hub writes it; an id with
neither network nor cache is one line saying what to do; local paths are never looked up."""
import json
import os

import pytest

from jaxwrite.cli import main as cli_main
from jaxwrite.common import InputError
from jaxwrite.common.hub import TOKENIZER_FILES, hub_id, resolve_pretrained
from jaxwrite.models import save_hf
from test_infer_support import model, tokenizer_dir

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture()
def offline_cache(tmp_path, monkeypatch):
    """An empty hub cache, offline: huggingface_hub reads both settings at import, so patch them there."""
    from huggingface_hub import constants
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


def _cached(cache, repo: str) -> str:
    """Writes a tiny HF checkpoint where the hub keeps ORG/NAME: models--ORG--NAME/snapshots/COMMIT, and
    refs/main naming that commit (the hub keeps files as blobs linked from the snapshot; a plain copy
    reads the same)."""
    root = cache / ("models--" + repo.replace("/", "--"))
    snapshot = root / "snapshots" / COMMIT
    save_hf(model(), str(snapshot), tokenizer_dir=tokenizer_dir())
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(COMMIT)
    return str(snapshot)


def test_ids_and_paths_are_told_apart(tmp_path, monkeypatch):
    assert hub_id("Qwen/Qwen2.5-7B-Instruct") == ("Qwen/Qwen2.5-7B-Instruct", None)
    assert hub_id("Qwen/Qwen2.5-7B@v1.0") == ("Qwen/Qwen2.5-7B", "v1.0")
    for not_an_id in ("", "./Qwen/x", "/abs/a", "~/a/b", "a/b/c", "plain", "a/../b"):
        assert hub_id(not_an_id) is None, not_an_id
    (tmp_path / "Org" / "Local").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert hub_id("Org/Local") is None                 # an existing folder wins over an id
    assert resolve_pretrained("Org/Local") == "Org/Local"


def test_a_cached_id_resolves_offline_and_loads(offline_cache, tmp_path):
    from jaxwrite.infer import load_for_inference
    snapshot = _cached(offline_cache, "TinyOrg/tiny-writer")
    assert os.path.samefile(resolve_pretrained("TinyOrg/tiny-writer"), snapshot)
    assert os.path.samefile(resolve_pretrained(f"TinyOrg/tiny-writer@{COMMIT}"), snapshot)
    assert os.path.samefile(resolve_pretrained("TinyOrg/tiny-writer", files=TOKENIZER_FILES), snapshot)
    loaded, tok = load_for_inference("TinyOrg/tiny-writer")
    assert loaded.cfg.num_layers == model().cfg.num_layers and tok.vocab_size > 0


def test_generate_takes_a_hub_id(offline_cache, tmp_path):
    _cached(offline_cache, "TinyOrg/tiny-writer")
    prompts, out = tmp_path / "p.jsonl", tmp_path / "out.jsonl"
    prompts.write_text(json.dumps({"index": 1, "query": "a story"}) + "\n")
    assert cli_main(["generate", "--model", "TinyOrg/tiny-writer", "--input", str(prompts), "--output", str(out),
                     "--temperature", "0", "--max-new-tokens", "3"]) == 0
    assert json.loads(out.read_text())["index"] == 1
    meta = json.loads((tmp_path / "out.jsonl.meta.json").read_text())
    assert meta["model"] == "TinyOrg/tiny-writer"      # recorded as given, not as a local path


def test_an_uncached_id_offline_is_one_line_with_what_to_do(offline_cache, tmp_path, capsys):
    with pytest.raises(InputError) as err:
        resolve_pretrained("Qwen/Qwen2.5-7B-Instruct", field="model.init_from")
    text = str(err.value)
    assert "\n" not in text and "model.init_from" in text and "HF_HUB_OFFLINE is set" in text
    assert "hf download Qwen/Qwen2.5-7B-Instruct" in text and str(offline_cache) in text
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"index": 1, "query": "x"}) + "\n")
    assert cli_main(["generate", "--model", "Qwen/Qwen2.5-7B-Instruct", "--input", str(prompts),
                     "--output", str(tmp_path / "o.jsonl")]) == 2
    stderr = capsys.readouterr().err.strip().splitlines()
    assert len(stderr[-1]) and "hf download" in stderr[-1] and "Traceback" not in "".join(stderr)


def test_init_from_and_tokenizer_path_take_hub_ids(offline_cache, tmp_path):
    from jaxwrite.train import load_recipe
    from jaxwrite.train.tokenizer_setup import setup_tokenizer
    snapshot = _cached(offline_cache, "TinyOrg/tiny-writer")
    config = load_recipe("cpt_tiny", ["tokenizer.path=TinyOrg/tiny-writer"])
    tok, path = setup_tokenizer(config, str(tmp_path / "w"))
    assert os.path.samefile(path, snapshot) and tok.vocab_size > 0
    from jaxwrite.train.setup import _load_initial_state
    from jaxwrite.parallel import DEFAULT_RULES, make_mesh
    loaded, backbone_only = _load_initial_state("TinyOrg/tiny-writer", "transformer", make_mesh((1, -1, 1)),
                                                DEFAULT_RULES)
    assert not backbone_only and loaded.cfg.num_layers == model().cfg.num_layers


def test_prep_roles_take_a_hub_id_and_urls_stay_urls(offline_cache, tmp_path, capsys):
    from jaxwrite.chat import HttpChatModel, LocalChatModel
    from jaxwrite.chat.resolve import model_spec, open_chat_model
    snapshot = _cached(offline_cache, "TinyOrg/tiny-writer")
    local = open_chat_model(model_spec("TinyOrg/tiny-writer", "--teacher"))
    assert isinstance(local, LocalChatModel) and local.label == "local:TinyOrg/tiny-writer"   # named as given
    assert local.engine.model.cfg.num_layers == model().cfg.num_layers
    with pytest.raises(InputError, match=r"missing: --teacher: expected an http\(s\):// URL, a local "
                                         r"model directory, a .gguf file or a Hugging Face hub id"):
        model_spec(str(tmp_path / "missing"), "--teacher")
    url = open_chat_model(model_spec("http://127.0.0.1:9/v1", "--teacher"), name="served-name")   # never looked up
    assert isinstance(url, HttpChatModel) and url.model == "served-name" and os.path.isdir(snapshot)
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"id": 1, "query": "a story"}) + "\n")
    assert cli_main(["prep", "criteria", "--queries", str(queries), "--output", str(tmp_path / "c.jsonl"),
                     "--generator", "Qwen/Qwen2.5-7B-Instruct", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "field '--generator'" in err and "hf download Qwen/Qwen2.5-7B-Instruct" in err


def test_model_info_takes_a_hub_id(offline_cache, capsys):
    _cached(offline_cache, "TinyOrg/tiny-writer")
    assert cli_main(["model", "info", "TinyOrg/tiny-writer", "--json"]) == 0
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert record["model"] == "TinyOrg/tiny-writer" and record["params"] == model().cfg.param_count()
    assert cli_main(["model", "info", "Qwen/Qwen2.5-7B-Instruct"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "field 'target'" in err and "HF_HUB_OFFLINE is set" in err


def test_pinned_spec_names_the_cached_registry_model(smollm2_gguf):
    """`pinned:NAME` (the real-weights recipes' init_from) is the pinned file from the cache, read as a GGUF
    model wherever a checkpoint is taken; an unknown name is one line listing the known ones."""
    from jaxwrite.checkpoint.pretrained import pretrained_config, resolve_source

    assert resolve_pretrained("pinned:smollm2-135m-instruct") == smollm2_gguf
    assert resolve_source("pinned:smollm2-135m-instruct") == (smollm2_gguf, "gguf")
    cfg, _ = pretrained_config("pinned:smollm2-135m-instruct", field="model.init_from")
    assert (cfg.d_model, cfg.num_layers, cfg.num_kv_heads) == (576, 30, 3)
    with pytest.raises(InputError, match="unknown pinned model 'smollm3'; expected one of smollm2-135m-instruct"):
        resolve_pretrained("pinned:smollm3")
    from jaxwrite.chat.resolve import local_model_spec
    spec = local_model_spec("pinned:smollm2-135m-instruct")
    assert spec.kind == "pinned" and spec.local_path() == smollm2_gguf
