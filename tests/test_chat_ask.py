"""The one ask-until-valid loop (`jaxwrite.chat.ask_until_valid`): a permanent error is asked once, a
transient one retried, an answer that fails the check re-sampled up to the limit, each ask with its own
reproducible seed; re-asks continue the conversation when asked to, and fall back to a fresh one."""
import zlib

import pytest

from jaxwrite.chat import ChatRequest, ChatResult, SamplingParams, ask_until_valid, request_seed
from jaxwrite.chat.ask import LAST_OUTPUT_CHARS, MODEL_ERROR, gravest


class Scripted:
    """Answers each request from the script of its item (the first user turn): a list of results taken in
    order, the last one repeated; records every request."""
    label, concurrency = "scripted", 4

    def __init__(self, script):
        self.script = script
        self.requests: list[ChatRequest] = []
        self.asked: dict[str, int] = {}

    def chat(self, requests):
        out = []
        for req in requests:
            self.requests.append(req)
            item = req.messages[0]["content"]
            n = self.asked[item] = self.asked.get(item, 0) + 1
            answers = self.script[item]
            answer = answers[min(n, len(answers)) - 1]
            out.append(answer(req) if callable(answer) else answer)
        return out


def _ask(item: str, attempt: int) -> ChatRequest:
    return ChatRequest(({"role": "user", "content": item},),
                       SamplingParams(max_new_tokens=8, seed=request_seed("run", item, attempt)))


def _check(text: str, _item) -> tuple:
    return (int(text), None) if text.isdigit() else (None, "not a number")


OK = ChatResult(text="7")
BAD = ChatResult(text="seven")
PERMANENT = ChatResult(text="", error="HTTP 400: prompt too long", retryable=False)
TRANSIENT = ChatResult(text="", error="HTTP 503: busy")


def test_permanent_asked_once_transient_retried_unparseable_resampled_to_the_limit():
    model = Scripted({"p": [PERMANENT], "t": [TRANSIENT, TRANSIENT, OK], "tt": [TRANSIENT],
                      "u": [ChatResult(text="x" * 5000)], "ok": [OK]})
    accepted = []
    asked = ask_until_valid(model, ["p", "t", "tt", "u", "ok"], _ask, _check, attempts=4,
                            on_valid=lambda a: accepted.append((a.item, len(model.requests))))
    by = {a.item: a for a in asked}
    assert [a.item for a in asked] == ["p", "t", "tt", "u", "ok"]
    assert model.asked == {"p": 1, "t": 3, "tt": 4, "u": 4, "ok": 1}
    assert by["t"].accepted and by["t"].value == 7 and by["t"].tries == 3
    # written as each is accepted: "ok" in the first round (5 requests in), "t" in the third
    assert accepted == [("ok", 5), ("t", 5 + 3 + 3)]
    assert by["p"].failure() == {"attempts": 1, "error": "HTTP 400: prompt too long", "permanent": True,
                                 "kind": "permanent", "last_output": ""}
    assert (by["tt"].kind, by["tt"].error, by["tt"].reasons) == ("transient", "HTTP 503: busy", [MODEL_ERROR] * 4)
    failure = by["u"].failure()
    assert failure["kind"] == "unparseable" and failure["error"] == "not a number" and failure["attempts"] == 4
    assert failure["last_output"] == "x" * LAST_OUTPUT_CHARS and LAST_OUTPUT_CHARS == 2000
    assert gravest([by["u"], by["tt"], by["p"]]) is by["p"] and gravest([by["u"], by["tt"]]) is by["tt"]


def test_each_ask_has_its_own_reproducible_seed():
    runs = []
    for _ in range(2):
        model = Scripted({"a": [BAD], "b": [BAD]})
        ask_until_valid(model, ["a", "b"], _ask, _check, attempts=3)
        runs.append([(r.messages[0]["content"], r.sampling.seed) for r in model.requests])
    assert runs[0] == runs[1]                                   # a re-run asks with the same seeds
    assert len({seed for _, seed in runs[0]}) == 6              # every item and attempt its own
    assert request_seed("run", "a", 0) == zlib.crc32(b"run:a:0") & 0x7FFFFFFF
    assert all(0 <= request_seed(k, "x") < 2 ** 31 for k in range(100))


def test_reask_continues_the_conversation_and_falls_back_to_a_fresh_one():
    too_long = ChatResult(text="", error="the conversation is past the context", retryable=False)
    fresh, continued = iter([BAD, BAD]), iter([too_long, OK])   # answers to fresh asks, to continued ones
    model = Scripted({"q": [lambda req: next(continued if len(req.messages) > 1 else fresh)]})
    [asked] = ask_until_valid(model, ["q"], _ask, _check, attempts=3, reask=lambda reason: f"Wrong: {reason}.")
    assert asked.accepted and asked.value == 7 and asked.tries == 3
    shapes = [[m["role"] for m in r.messages] for r in model.requests]
    # attempt 1 continues the conversation naming the reason; the model cannot take it, so the same attempt
    # is asked afresh (its own seed); its answer fails again and attempt 2 continues from that fresh ask
    assert shapes == [["user"], ["user", "assistant", "user"], ["user"], ["user", "assistant", "user"]]
    assert model.requests[1].messages[1:] == ({"role": "assistant", "content": "seven"},
                                             {"role": "user", "content": "Wrong: not a number."})
    fallback = model.requests[2]
    assert fallback.sampling.seed not in (model.requests[1].sampling.seed, model.requests[0].sampling.seed)
    assert asked.reask_errors == ["the conversation is past the context"]
    assert asked.reasons == ["not a number", "not a number"]


def test_without_reask_every_ask_is_fresh():
    model = Scripted({"q": [BAD]})
    [asked] = ask_until_valid(model, ["q"], _ask, _check, attempts=3)
    assert [len(r.messages) for r in model.requests] == [1, 1, 1] and not asked.accepted


def test_attempts_must_be_positive():
    with pytest.raises(ValueError, match="attempts"):
        ask_until_valid(Scripted({}), ["q"], _ask, _check, attempts=0)
