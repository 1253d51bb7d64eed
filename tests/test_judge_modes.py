"""Judge modes and judge errors (issue 18, items 2, 4, 5).

- Every chat model describes who answers and how (`describe()`), and metadata lists only the settings
  that applied in its mode.
- score_logit stores the argmax and the expected score in their own fields, says which aggregates, and
  its reason never contradicts the stored score; commands whose verdicts are not one 1-10 score
  (LongBench-Write, agreement, arena, RefineBench) refuse it up front in one line naming the flag.
- A judge server's 4xx is a permanent error: reported with the server's message, not re-asked, never
  "re-run to retry"; timeouts/5xx are transient and retried. Real servers on 127.0.0.1: `jaxwrite
  serve`'s own server with a small context, and a scripted OpenAI-compatible one.
"""
import json
import re

import pytest
from flax import nnx

from jaxwrite.chat import ChatRequest, ChatResult, HttpChatModel, LocalChatModel, SamplingParams, describe_model
from jaxwrite.cli import main as cli_main
from jaxwrite.common import InputError
from jaxwrite.evals import LocalJudge, WritingBenchScoring, score_longbench_write, score_writingbench
from jaxwrite.evals.arena import judge_arena
from jaxwrite.infer import Engine
from jaxwrite.infer import InferenceServer, ServeSettings
from jaxwrite.models import Transformer, get_preset
from test_evals_judge_http import OpenAIStub
from test_infer_support import engine, tokenizer

CONTEXT_400 = "18036 tokens leave no room in the 4096-token context"


@pytest.fixture(scope="module")
def small_server():
    """`jaxwrite serve`'s server on a tiny model whose context (64 tokens) no judge prompt fits."""
    srv = InferenceServer(engine(max_context=64), ServeSettings(port=0, model_name="tiny", quiet=True))
    srv.start_background()
    yield f"http://127.0.0.1:{srv.port}/v1"
    srv.close()


def _quiet(judge):
    judge.waits = []
    judge._sleep = judge.waits.append  # observe backoff without waiting
    return judge


def _ask(content):
    return ChatRequest(({"role": "user", "content": content},), SamplingParams(max_new_tokens=4))


# ---------------------------------------------------------------------------------------- describe

def test_every_chat_model_describes_its_transport_mode_and_applied_settings():
    eng = engine()
    http = HttpChatModel("http://127.0.0.1:1/v1", "critic", max_retries=2)
    models = {"http": http, "local": LocalChatModel(engine=eng, name="tiny"),
              "judge": LocalJudge(engine=eng, name="tiny"), "logit": LocalJudge(engine=eng, mode="score_logit",
                                                                                 name="tiny")}
    info = {k: m.describe() for k, m in models.items()}
    for k, m in models.items():
        assert json.loads(json.dumps(info[k])) == info[k]
        assert set(info[k]) == {"label", "transport", "mode", "official", "settings"} and info[k]["label"] == m.label
    assert [(i["transport"], i["mode"], i["official"]) for i in info.values()] == [
        ("http", "generate", True), ("local", "generate", True), ("local", "generate", True),
        ("local", "score_logit", False)]
    assert info["http"]["settings"]["transient_retries"] == 2 and info["logit"]["settings"]["aggregates"] == "score_argmax"

    sampling = SamplingParams(temperature=1.0, top_p=0.95, max_new_tokens=2048)
    used = describe_model(http, sampling, attempts=15)["settings"]
    assert (used["temperature"], used["top_p"], used["max_tokens"], used["attempts"]) == (1.0, 0.95, 2048, 15)
    # score_logit samples nothing and re-asks nothing: neither setting applies, so neither is listed
    logit = describe_model(models["logit"], sampling, attempts=15)["settings"]
    assert not {"temperature", "top_p", "top_k", "max_tokens", "attempts"} & set(logit)

    class Plain:   # a caller's own chat model, without describe
        label = "mine"
    assert describe_model(Plain(), attempts=3) == {"label": "mine", "transport": "unknown", "mode": "generate",
                                                   "official": True, "settings": {"attempts": 3}}


# ------------------------------------------------------------------------- permanent vs transient

def test_a_4xx_from_jaxwrite_serve_is_permanent_with_the_servers_message(small_server):
    judge = _quiet(HttpChatModel(small_server, "tiny", max_retries=5))
    [result] = judge.chat([_ask("the story of the river at night " * 20)])
    assert not result.ok and result.permanent and not result.retryable
    assert re.fullmatch(r"HTTP 400: field 'prompt': \d+ tokens leave no room in the 64-token context", result.error)
    assert judge.waits == []   # not retried


def test_a_503_then_success_is_retried_and_a_lasting_one_is_transient():
    with OpenAIStub() as server:
        judge = _quiet(HttpChatModel(server.url, "critic", max_retries=2))
        recovered, lasting = judge.chat([_ask("503once:x"), _ask("503always")])
    assert recovered.ok and recovered.text == "echo:503once:x"
    assert not lasting.ok and lasting.retryable and not lasting.permanent and "HTTP 503" in lasting.error
    assert sum(c["messages"][0]["content"] == "503once:x" for c in server.calls) == 2
    assert sum(c["messages"][0]["content"] == "503always" for c in server.calls) == 3


def test_writingbench_scoring_tells_permanent_from_transient_errors(tmp_path, data_dir, capsys):
    answers = {1: "answer that is too long", 2: "answer from a flaky server", 3: "answer to a server that is down"}
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps({"index": i, "response": r}) + "\n" for i, r in answers.items()))

    def fail(content):
        if answers[1] in content:
            return 400, {"error": {"message": CONTEXT_400, "type": "invalid_request_error"}}
        if answers[3] in content:
            return 503, {"error": "overloaded"}
        return None

    flaky_seen = set()

    def answer(content):
        return '{"score": 6, "reason": "fine"}'

    def fail_or_flake(content):
        if answers[2] in content and content not in flaky_seen:   # each criterion's first call: 503
            flaky_seen.add(content)
            return 503, {"error": "busy"}
        return fail(content)

    with OpenAIStub(answer=answer, fail=fail_or_flake) as server:
        judge = _quiet(HttpChatModel(server.url, "critic", max_retries=1))
        result = score_writingbench(responses, judge, tmp_path / "scores.jsonl",
                                    WritingBenchScoring(data_dir, indices=(1, 2, 3), attempts=3, progress=False))
    calls = lambda i: sum(answers[i] in c["messages"][1]["content"] for c in server.calls)
    assert calls(1) == 5          # one request per criterion: a 4xx is never asked again
    assert calls(2) == 10         # each criterion: a 503, then the answer on the client's retry
    assert calls(3) == 5 * 3 * 2  # transient: every attempt, each with one client retry
    run = result["runs"][0]
    assert (run["scored"], run["failed"]) == (1, 2)
    failures = [json.loads(l) for l in (tmp_path / "scores.failures.jsonl").read_text().splitlines()]
    too_long = [f for f in failures if f["index"] == 1]
    assert len(too_long) == 5 and all(f["permanent"] and f["attempts"] == 1 and CONTEXT_400 in f["error"]
                                      for f in too_long)
    assert all(not f["permanent"] and f["attempts"] == 3 for f in failures if f["index"] == 3)
    err = capsys.readouterr().err
    permanent = next(l for l in err.splitlines() if "permanent" in l)
    assert "1 query(s) failed with a permanent error" in permanent and CONTEXT_400 in permanent
    assert "HTTP 400" in permanent and "re-run to retry" not in permanent
    transient = next(l for l in err.splitlines() if "transient" in l)
    assert "1 query(s) failed with a transient error" in transient and "HTTP 503" in transient
    assert "re-run to retry them" in transient


class ContextTooSmallJudge:
    """In-process stand-in for a judge whose context the prompt does not fit; counts its calls."""
    label = "fake:small-context"

    def __init__(self):
        self.calls = 0

    def chat(self, requests):
        self.calls += len(requests)
        return [ChatResult(text="", error=f"HTTP 400: {CONTEXT_400}", retryable=False) for _ in requests]


def test_arena_reports_a_permanent_error_once_per_judgement_without_retry_advice(tmp_path, capsys):
    judge = ContextTooSmallJudge()
    records = judge_arena({1: "p"}, {"x": {1: "aa"}, "y": {1: "a"}}, judge, str(tmp_path / "v.jsonl"),
                          progress=False)
    assert records == [] and judge.calls == 2   # both orders asked once, not 3 tries each
    err = capsys.readouterr().err
    assert f"2 judgement(s) failed with a permanent error, first: HTTP 400: {CONTEXT_400}" in err
    assert "re-run to retry" not in err


def test_eval_agreement_against_jaxwrite_serve_names_the_servers_error(small_server, data_dir, tmp_path, capsys):
    out = tmp_path / "agreement"
    assert cli_main(["eval", "agreement", "--judge", small_server, "--judge-model", "tiny",
                     "--max-pairs", "2", "--single-order", "--bootstrap", "10", "--data-dir", str(data_dir),
                     "--output", str(out)]) == 0
    err = capsys.readouterr().err
    assert re.search(r"agreement: 2 judgement\(s\) failed with a permanent error, first: HTTP 400: field "
                     r"'prompt': \d+ tokens leave no room in the 64-token context", err)
    assert "re-run to retry" not in err


# ---------------------------------------------------------------------------------------- score_logit

def test_score_logit_stores_both_figures_and_only_the_settings_that_applied(tmp_path, data_dir):
    # The shortest WritingBench critic prompt is ~3,700 tokens with the test tokenizer.
    model = Transformer(get_preset("tiny", vocab_size=tokenizer().vocab_size, max_seq_len=4096), nnx.Rngs(0))
    judge = LocalJudge(engine=Engine(model, tokenizer(), max_batch=5), mode="score_logit", name="tiny")
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"index": 202, "response": "A short poem."}) + "\n")
    out = tmp_path / "scores.jsonl"
    result = score_writingbench(responses, judge, out, WritingBenchScoring(data_dir, indices=(202,), progress=False))
    assert result["runs"][0]["scored"] == 1 and result["judge_info"]["mode"] == "score_logit"
    [line] = [json.loads(l) for l in out.read_text().splitlines()]
    for [verdict] in line["scores"].values():
        assert verdict["score"] == verdict["score_argmax"] and 1 <= verdict["score_argmax"] <= 10
        assert isinstance(verdict["score_expected"], float) and 1 <= verdict["score_expected"] <= 10
        # the reason states both figures, so it cannot contradict the stored score
        assert f"score {verdict['score_argmax']} is the most likely" in verdict["reason"]
        assert f"expected score {verdict['score_expected']:.4f}" in verdict["reason"]
    meta = json.loads((tmp_path / "scores.jsonl.meta.json").read_text())
    # no sampling settings and no attempts: score_logit asks each criterion once, sampling nothing
    assert meta["aggregates"] == "score_argmax" and not {"attempts", "sampling"} & set(meta)
    assert meta["judge_info"]["official"] is False and meta["judge_info"]["mode"] == "score_logit"
    assert not {"temperature", "top_p", "max_tokens", "attempts"} & set(meta["judge_info"]["settings"])


@pytest.mark.parametrize("argv, flag", [
    (["eval", "longbench-write", "score", "--responses", "r.jsonl", "--output", "o",
      "--judge", "DIR", "--judge-mode", "score_logit"], "LongBench-Write's six 1-5"),
    (["eval", "longbench-write", "score", "--responses", "r.jsonl", "--output", "o",
      "--judge-mode", "score_logit"], "LongBench-Write's six 1-5"),
    (["eval", "agreement", "--output", "o", "--judge", "DIR", "--judge-mode", "score_logit"],
     "[[A]]/[[B]]/[[C]]"),
    (["eval", "arena", "--responses", "a.jsonl", "b.jsonl", "--prompts", "p.jsonl", "--output", "o",
      "--judge", "DIR", "--judge-mode", "score_logit"], "[[A]]/[[B]]/[[C]]"),
])
def test_a_mode_a_command_cannot_use_is_refused_in_one_line(argv, flag, tmp_path, capsys, monkeypatch, data_dir):
    monkeypatch.chdir(tmp_path)
    for name in ("r.jsonl", "a.jsonl", "b.jsonl"):
        (tmp_path / name).write_text(json.dumps({"index": 1, "id": 1, "response": "x"}) + "\n")
    (tmp_path / "p.jsonl").write_text(json.dumps({"id": 1, "prompt": "p"}) + "\n")
    monkeypatch.setenv("JAXWRITE_DATA_DIR", str(data_dir))
    assert cli_main(argv) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "--judge-mode score_logit: not usable here" in line and flag in line
    assert line.endswith("modes that work: generate")


def test_score_logit_needs_a_local_judge(capsys):
    assert cli_main(["eval", "writingbench", "score", "--responses", "r.jsonl", "--output", "o",
                     "--judge", "http://127.0.0.1:1/v1", "--judge-model", "m", "--judge-mode", "score_logit"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "--judge-mode score_logit: needs a local model" in line


def test_longbench_write_refuses_a_score_logit_judge_object(tmp_path, data_dir):
    judge = LocalJudge(engine=engine(), mode="score_logit", name="tiny")
    (tmp_path / "r.jsonl").write_text(json.dumps({"index": 1, "response": "x"}) + "\n")
    with pytest.raises(InputError, match="judge mode score_logit: cannot produce LongBench-Write's verdict"):
        score_longbench_write(tmp_path / "r.jsonl", tmp_path / "out", data_dir, judge=judge, progress=False)
    assert not (tmp_path / "out").exists()   # refused before anything was written


def test_refinebench_offers_a_mode_for_its_judge_only(capsys):
    # the model under test always generates: no --model-mode whose other value is always refused
    with pytest.raises(SystemExit) as done:
        cli_main(["eval", "refinebench", "--help"])
    assert done.value.code == 0
    help_text = capsys.readouterr().out
    assert "--judge-mode" in help_text and not re.search(r"--model-mode\b", help_text)
