"""One chat-model interface: the HTTP client against jaxwrite's own OpenAI-compatible server on 127.0.0.1
and the in-process client on the same tiny model answer the same requests alike, and both expose
`label`, `concurrency` and `chat`, which callers size their batches from (issue 18: `eval arena
--judge DIR` asked the local judge for a `concurrency` it did not have)."""
import json

import pytest
from flax import nnx

from jaxwrite.chat import CHAT_SAMPLING, ChatModel, ChatRequest, HttpChatModel, LocalChatModel, SamplingParams
from jaxwrite.cli import main as cli_main
from jaxwrite.evals import LocalJudge
from jaxwrite.infer import Limits, InferenceServer, ServeSettings
from jaxwrite.models import Transformer, get_preset, save_hf
from test_infer_support import engine, tokenizer, tokenizer_dir

VERDICT = {"type": "object", "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 10},
                                            "reason": {"type": "string"}}, "required": ["score", "reason"]}


@pytest.fixture(scope="module")
def server():
    srv = InferenceServer(engine(), ServeSettings(port=0, model_name="tiny", limits=Limits(max_tokens=64), quiet=True))
    srv.start_background()
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def clients(server):
    http = HttpChatModel(f"http://127.0.0.1:{server.port}/v1", "tiny", concurrency=3, max_retries=0)
    return http, LocalChatModel(engine=engine(max_batch=4), name="tiny")


def _ask(content, schema=None, **sampling) -> ChatRequest:
    return ChatRequest(({"role": "user", "content": content},), SamplingParams(**sampling), schema)


def test_both_clients_share_one_interface(clients):
    http, local = clients
    for client in (http, local, LocalJudge(engine=local.engine, mode="score_logit")):
        assert isinstance(client, ChatModel)
        assert isinstance(client.label, str) and isinstance(client.concurrency, int) and client.concurrency >= 1
        assert client.chat([]) == []
    assert http.concurrency == 3 and local.concurrency == 4
    assert http.label == f"http:tiny@{http.url}" and local.label == "local:tiny"


def test_same_requests_same_answers(clients):
    http, local = clients
    [probe] = local.chat([_ask("the story", temperature=0.0, max_new_tokens=12)])
    assert probe.ok and len(probe.text) > 4
    stop = probe.text[2:4]
    requests = [_ask("the story", temperature=0.0, max_new_tokens=12),
                _ask("a long essay", temperature=1.5, top_p=0.9, top_k=20, max_new_tokens=10, seed=7),
                _ask("the story", temperature=0.0, max_new_tokens=12, stop=(stop,)),
                _ask("rate it", VERDICT, temperature=1.0, max_new_tokens=40, seed=3)]
    over_http, in_process = http.chat(requests), local.chat(requests)
    assert [(r.text, r.finish_reason) for r in over_http] == [(r.text, r.finish_reason) for r in in_process]
    assert all(r.ok for r in over_http)
    assert over_http[2].finish_reason == "stop" and stop not in over_http[2].text
    assert 1 <= json.loads(over_http[3].text)["score"] <= 10


def test_bad_request_is_that_requests_error_in_both(clients):
    http, local = clients
    requests = [_ask("the story", temperature=0.0, max_new_tokens=0),
                _ask("the story", temperature=0.0, max_new_tokens=8)]
    for client, field in zip(clients, ("max_tokens", "max_new_tokens")):   # each names the field it was given
        bad, good = client.chat(requests)
        assert not bad.ok and f"field '{field}'" in bad.error
        assert good.ok and good.error is None
    assert ChatRequest(({"role": "user", "content": "x"},)).sampling == CHAT_SAMPLING
    with pytest.raises(ValueError, match="one sample"):
        ChatRequest(({"role": "user", "content": "x"},), SamplingParams(n=2))


def test_eval_arena_with_a_local_judge_model_dir(tmp_path):
    model_dir = tmp_path / "judge"   # a context long enough for the pairwise prompt
    judge = Transformer(get_preset("tiny", vocab_size=tokenizer().vocab_size, max_seq_len=1024), nnx.Rngs(0))
    save_hf(judge, str(model_dir), tokenizer_dir=tokenizer_dir())
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": i, "prompt": f"write {i}"}) + "\n" for i in range(2)))
    for name, text in (("short", "a"), ("long", "the river at night")):
        (tmp_path / f"{name}.jsonl").write_text(
            "".join(json.dumps({"id": i, "response": text}) + "\n" for i in range(2)))
    out = tmp_path / "arena"
    argv = ["eval", "arena", "--responses", str(tmp_path / "short.jsonl"), str(tmp_path / "long.jsonl"),
            "--prompts", str(prompts), "--judge", str(model_dir), "--judge-concurrency", "2",
            "--judge-max-tokens", "4", "--bootstrap", "5", "--output", str(out)]
    assert cli_main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["judge"] == f"local:{model_dir}"
    assert len((out / "verdicts.jsonl").read_text().splitlines()) == 4   # 2 prompts x both orders
