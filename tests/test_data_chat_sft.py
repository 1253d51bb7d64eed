"""Critic / writer SFT: official critic prompt rendering, assistant-only loss mask, contamination guard."""
import json
import re

import pytest

from data_pipelines import ContaminationGuard, chat_example, critic_sft_examples, sft_dataset, writer_sft_examples
from data_pipelines.chat_sft import critic_sft_conversations
from jaxwrite.common import InputError
from jaxwrite.prompts import critic_messages, official_prompt

SPECIALS = {"<|im_start|>": 4, "<|im_end|>": 1}


class ChatTokenizer:
    """Character ids plus Qwen-style special tokens and chat template (what jaxwrite.text provides)."""
    eos_ids, bos_id, pad_id = (1,), None, 0

    def encode(self, text, add_special_tokens=False):
        ids = []
        for part in re.split(r"(<\|im_start\|>|<\|im_end\|>)", text):
            ids.extend([SPECIALS[part]] if part in SPECIALS else [10 + ord(c) for c in part])
        return ids

    def decode(self, ids):
        inverse = {v: k for k, v in SPECIALS.items()}
        return "".join(inverse[i] if i in inverse else chr(i - 10) for i in map(int, ids))

    def apply_chat_template(self, messages, add_generation_prompt=True):
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


def _criterion():
    return {"name": "Clarity", "criteria_description": "Is it clear? 是否清楚", "1-2": "no", "3-4": "meh",
            "5-6": "ok", "7-8": "good", "9-10": "great"}


def test_critic_prompt_renders_criterion_as_python_dict():
    messages = critic_messages("Write a poem.", _criterion(), "Roses.")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == official_prompt("writingbench_critic_system")
    user = messages[1]["content"]
    assert user.count(str(_criterion())) == 2 and "'name': 'Clarity'" in user and "是否清楚" in user
    assert "```Write a poem.```" in user and "```Roses.```" in user and '{\n    "score"' in user


def test_loss_mask_covers_assistant_json_and_end_of_turn_only():
    tok = ChatTokenizer()
    verdict = json.dumps({"score": 7, "reason": "清楚"}, ensure_ascii=False)
    ex = chat_example(tok, [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}], verdict)
    trained_targets = ex["targets"][ex["loss_mask"] == 1]
    assert tok.decode(trained_targets) == verdict + "<|im_end|>"
    assert (ex["targets"][:-1] == ex["tokens"][1:]).all()


def _write_records(path, queries):
    with open(path, "w", encoding="utf-8") as f:
        for q in queries:
            f.write(json.dumps({"query": q, "response": "R", "criterion": _criterion(), "score": 6,
                                "reason": "fine"}, ensure_ascii=False) + "\n")


def test_sft_data_renders_the_critic_call_the_evaluator_makes(tmp_path):
    from jaxwrite.evals import critic_request
    path = str(tmp_path / "records.jsonl")
    _write_records(path, ["Write a poem.", "写一首诗。"])
    conversations, _ = critic_sft_conversations(path, None)
    for (messages, verdict), query in zip(conversations, ["Write a poem.", "写一首诗。"]):
        assert tuple(messages) == critic_request(query, _criterion(), "R", seed=0).messages
        assert verdict == '{"score": 6, "reason": "fine"}'


def test_guard_refuses_or_drops_benchmark_queries(tmp_path):
    bench = ["Write a detailed market analysis of electric bicycles in Northern Europe covering pricing "
             "channels competitors regulation and a five year forecast with tables",
             "请写一篇关于城市绿化的调研报告，包括现状、问题、对策和结论，字数三千字左右，语言正式。"]
    guard = ContaminationGuard(bench)
    path = str(tmp_path / "records.jsonl")
    _write_records(path, ["Tell me a joke about cats.",
                          "  WRITE a detailed market analysis of electric bicycles in northern europe covering pricing "
                          "channels competitors regulation and a five year forecast with tables ",   # exact (normalised)
                          "您好！" + bench[1][:-6] + "谢谢！"])                                          # near-exact
    with pytest.raises(InputError, match=r"records.jsonl:2 field 'query': 2 record\(s\) overlap"):
        critic_sft_examples(path, ChatTokenizer(), guard)
    examples, stats = critic_sft_examples(path, ChatTokenizer(), guard, on_overlap="drop")
    assert len(examples) == 1 and stats["dropped"] == 2 and stats["records"] == 3
    kept, stats = critic_sft_examples(path, ChatTokenizer(), guard, allow_overlap=True)
    assert len(kept) == 3 and stats["overlapping"] == 2 and stats["dropped"] == 0


def test_guard_on_writingbench_catches_copies_not_fresh_prompts(data_dir):
    guard = ContaminationGuard.from_writingbench(str(data_dir / "writingbench" / "benchmark_all.jsonl"))
    with open(data_dir / "writingbench" / "benchmark_all.jsonl", encoding="utf-8") as f:
        queries = [json.loads(line)["query"] for line in f]
    long_en = next(q for q in queries if len(q.split()) > 200)
    assert guard.find("Hi! " + long_en[: len(long_en) // 2]).kind == "ngram"
    assert guard.find(queries[10]).protected_index == 10
    assert guard.find("Write a short story about a lighthouse keeper who befriends a lost whale in winter.") is None


def test_invalid_critic_score_names_line_and_field(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"query": "q", "response": "r", "criterion": _criterion(), "score": "7",
                                "reason": "x"}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.jsonl:1 field 'score': expected an integer 1..10"):
        critic_sft_examples(str(path), ChatTokenizer(), None)


def test_writer_sft_rows_pack_and_pad(tmp_path):
    path = tmp_path / "writer.jsonl"
    path.write_text("".join(json.dumps({"query": f"q{i}", "response": "resp" * (i + 1)}) + "\n"
                            for i in range(6)), encoding="utf-8")
    examples, stats = writer_sft_examples(str(path), ChatTokenizer(), None)
    assert stats["kept"] == 6
    tok = ChatTokenizer()
    assert tok.decode(examples[0]["targets"][examples[0]["loss_mask"] == 1]) == "resp<|im_end|>"
    for pack in (True, False):
        batches = list(sft_dataset(examples, seq_len=64, batch_size=2, num_epochs=1, pack=pack,
                                   drop_remainder=False))
        trained = sum(int(b["loss_mask"].sum()) for b in batches)
        assert trained == sum(int(e["loss_mask"].sum()) for e in examples)
        assert all(b["tokens"].shape[1] == 64 for b in batches)
        if not pack:
            assert len(batches) == 3  # one example per row, 6 rows
