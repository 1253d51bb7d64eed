"""Teacher verdicts -> critic SFT data (official format), bad input, split, the 7B recipe's steps from
epochs, agreement metrics, and (slow) a tiny critic learning the rule teacher vs a shuffled control."""
import json
import os
import subprocess
import sys

import pytest

import data_pipelines as dp
from jaxwrite.common import InputError, load_config
from jaxwrite.evals.critic_agreement import score_agreement, spearman
from jaxwrite.evals.writingbench_critic import parse_critic_output
from jaxwrite.prep.rule_teacher import rule_verdict, rule_verdicts
from jaxwrite.prompts import critic_messages
from jaxwrite.train.defaults import epoch_steps
from train_fixtures import REPO

TEST_MIN_RHO = 0.4

CRITERION = {"name": "Clarity", "criteria_description": "Is it clear?", "1-2": "no", "3-4": "a bit",
             "5-6": "fair", "7-8": "good", "9-10": "very"}


def _verdicts(path, n=40, **change):
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            rec = {"query": f"Write note {i // 4} about the old house.", "response": f"Text {i}.",
                   "criterion": CRITERION if i % 2 else "Fluency", "score": 1 + i % 10, "reason": f"reason {i}"}
            f.write(json.dumps({**rec, **change} if i == n - 1 else rec) + "\n")
    return str(path)


def test_builder_writes_official_format_that_parses_back(tmp_path):
    path = _verdicts(tmp_path / "v.jsonl")
    stats = dp.build_critic_data(dp.read_verdicts(path), str(tmp_path / "out"), source=path,
                                 heldout_fraction=0.3, seed=0)
    assert stats["train"]["records"] + stats["heldout"]["records"] == 40 and stats["heldout"]["records"] > 0
    records = [json.loads(x) for x in open(tmp_path / "out" / "train.jsonl")]
    rendered = [json.loads(x)["messages"] for x in open(tmp_path / "out" / "train.messages.jsonl")]
    # The trainer's reader accepts the records as they are.
    assert len(dp.read_critic_records(str(tmp_path / "out" / "train.jsonl"))) == len(records)
    for rec, messages in zip(records, rendered):
        assert messages[:2] == critic_messages(rec["query"], rec["criterion"], rec["response"])
        assert parse_critic_output(messages[2]["content"]) == (rec["score"], rec["reason"])
    assert {"name": "Fluency"} in [r["criterion"] for r in records]   # a string criterion becomes a dict


@pytest.mark.parametrize("change,field", [({"score": "7"}, "score"), ({"score": 11}, "score"),
                                          ({"reason": 3}, "reason"), ({"criterion": {}}, "criterion")])
def test_bad_field_names_file_line_field(tmp_path, change, field):
    path = _verdicts(tmp_path / "v.jsonl", **change)
    with pytest.raises(InputError, match=f"v.jsonl:40 field '{field}'"):
        dp.read_verdicts(path)


def test_missing_field_names_file_line_field(tmp_path):
    path = _verdicts(tmp_path / "v.jsonl")
    lines = open(path).read().splitlines()
    rec = json.loads(lines[6])
    del rec["criterion"]
    lines[6] = json.dumps(rec)
    open(path, "w").write("\n".join(lines) + "\n")
    with pytest.raises(InputError) as err:
        dp.read_verdicts(path)
    assert str(err.value) == f"{path}:7 field 'criterion': missing required field"


def test_split_is_by_query_and_deterministic(tmp_path):
    records = dp.read_verdicts(_verdicts(tmp_path / "v.jsonl", n=200))
    a = dp.split_by_query(records, 0.25, seed=3)
    assert a == dp.split_by_query(list(reversed(records))[::-1], 0.25, seed=3)
    assert not {r["query"] for _, r in a[0]} & {r["query"] for _, r in a[1]}
    assert a != dp.split_by_query(records, 0.25, seed=4)


def test_critic_score_output_is_accepted(tmp_path):
    crit = {"id": 7, "query": "Write a poem.", "checklist": [CRITERION]}
    (tmp_path / "c.jsonl").write_text(json.dumps(crit) + "\n")
    (tmp_path / "r.jsonl").write_text(json.dumps({"response_id": "7#0", "id": 7, "sample": 0,
                                                  "response": "plan</think>\n\nA poem."}) + "\n")
    (tmp_path / "s.jsonl").write_text(json.dumps({"response_id": "7#0", "id": 7, "sample": 0, "score": 6.0,
                                                  "scores": {"Clarity": [{"score": 6, "reason": "ok"}]}}) + "\n")
    (line, rec), = dp.verdicts_from_critic_scores(*(str(tmp_path / f) for f in ("s.jsonl", "c.jsonl", "r.jsonl")))
    assert (line, rec["response"], rec["criterion"], rec["score"]) == (1, "A poem.", CRITERION, 6)


def test_7b_recipe_derives_steps_from_epochs():
    config = load_config(f"{REPO / 'configs' / 'critic_sft_qwen2.5_7b.py'}:v5p-32")
    assert (config.optimizer.learning_rate, config.num_epochs, config.data.batch_size,
            config.grad_accum_steps, config.data.num_records) == (7e-6, 3, 64, 4, 155_000)
    assert config.num_steps == epoch_steps(155_000, 3, 64) == 155_000 * 3 // 64 == 7265
    assert not config.data.pack   # a row is one verdict, so batch 64 means 64 verdicts
    config = load_config(f"{REPO / 'configs' / 'critic_sft_qwen2.5_7b.py'}:gpu", ["--config.data.num_records=1000"])
    assert config.num_steps == 46 and config.data.batch_size == 64


def test_agreement_metrics():
    assert spearman([1, 2, 2, 3], [1, 2, 2, 3]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 2, 2], [1, 2, 1, 2]) == pytest.approx(0.0)
    out = score_agreement([3, 5, None, 9], [3, 6, 4, 1])
    assert (out["parseable"], out["exact"], out["within1"]) == (0.75, pytest.approx(1 / 3), pytest.approx(2 / 3))


def test_rule_teacher_is_transparent(full_data_dir):
    data_dir = full_data_dir   # full data only: GOOD + OTHER are the full Chinese corpus's commonest characters
    from jaxwrite.prep.rule_teacher import GOOD, OTHER, commonest_chars
    assert commonest_chars(str(data_dir / "corpus_zh")) == GOOD + OTHER   # the sets are what the label says
    assert rule_verdict("q", GOOD[:3] * 4 + OTHER[:3] * 16, CRITERION)["score"] == 2   # 12 of 60 -> 2
    assert rule_verdict("q", GOOD[:3] * 11 + OTHER[:3] * 9, CRITERION)["score"] == 6   # 33 of 60 -> 5.5 -> 6
    assert rule_verdict("q", GOOD * 3 + "abc", CRITERION)["score"] == 10
    assert rule_verdict("q", "abc", None)["score"] == 1   # no CJK character
    recs = rule_verdicts(str(data_dir), num_queries=3, per_criterion=2, seed=0)
    assert recs == rule_verdicts(str(data_dir), num_queries=3, per_criterion=2, seed=0) and len(recs) == 30
    assert all(rule_verdict(r["query"], r["response"], r["criterion"])["score"] == r["score"] for r in recs)
    assert {r["score"] for r in rule_verdicts(str(data_dir), num_queries=4, per_criterion=4)} == {2, 6, 10}


def test_word_share_rule_counts_english_words(full_data_dir):
    from jaxwrite.prep.rule_teacher import GOOD_WORDS, OTHER_WORDS, RESPONSE_WORDS, teacher_text
    assert not set(GOOD_WORDS) & set(OTHER_WORDS)
    verdict = rule_verdict("q", "Vivid, " + "dull " * 3 + "warm.", CRITERION, rule="word-share")
    assert verdict == {"score": 4, "reason": "2 of 5 words are in the set; score 4."}   # case and punctuation
    assert rule_verdict("q", "", CRITERION, rule="word-share")["score"] == 1
    assert rule_verdict("q", "了不一", CRITERION, rule="word-share")["score"] == 1     # not a set word
    with pytest.raises(ValueError, match="unknown rule 'nope'"):
        rule_verdict("q", "vivid", CRITERION, rule="nope")
    recs = rule_verdicts(str(full_data_dir), num_queries=4, per_criterion=4, seed=0, rule="word-share")
    assert recs == rule_verdicts(str(full_data_dir), num_queries=4, per_criterion=4, seed=0, rule="word-share")
    assert {r["score"] for r in recs} == {2, 6, 10}
    assert all(len(r["response"].split()) == RESPONSE_WORDS for r in recs)
    assert all(rule_verdict("", r["response"], None, rule="word-share")["score"] == r["score"] for r in recs)
    assert "vivid" in teacher_text("word-share") and "CJK" in teacher_text()


@pytest.mark.slow
def test_tiny_critic_learns_the_teacher(full_data_dir, tmp_path):
    """Main critic vs the shuffled-label control, seeded, smaller than the demo (critic_demo.TEST_SIZE).
    Run in a fresh process on one CPU device, as the quickstart runs it (this suite simulates 8).
    Measured: main ρ 0.61 (exact 0.58), control ρ 0.09 (exact 0.31); 598 s wall, 587 CPU-s, on a
    2-core CPU shared with another training run (load 5-7). Over the ~90 s target: the official prompt
    is ~1,100 tokens per example and the score is learned after ~50 steps of batch 4."""
    data_dir = full_data_dir   # full data only: the ρ bars were measured on the full data sets
    code = ("import sys; from jaxwrite.quickstart.critic_demo import TEST_SIZE, run_critic_demo; "
            "run_critic_demo(sys.argv[1], sys.argv[2], seed=0, control=True, **TEST_SIZE)")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    done = subprocess.run([sys.executable, "-c", code, str(data_dir), str(tmp_path)], env=env, cwd=str(REPO),
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.load(open(tmp_path / "critic_demo.json"))
    ctrl = out["control_shuffled"]
    assert out["parseable"] == 1.0 and ctrl["parseable"] == 1.0
    assert out["spearman"] >= TEST_MIN_RHO, out
    assert not ctrl["spearman"] >= 0.3 and not ctrl["spearman"] <= -0.3, out   # nan (constant) passes
    assert out["within1"] > ctrl["within1"], out


def test_cli_critic_data_builds_and_names_bad_field(data_dir, tmp_path, capsys):
    from jaxwrite.cli import main
    path = _verdicts(tmp_path / "v.jsonl")
    base = ["data", "critic-data", "--data-dir", str(data_dir), "--output-dir", str(tmp_path / "out")]
    assert main(base + ["--verdicts", path, "--heldout-fraction", "0.25"]) == 0
    assert "--config.data.num_records=" in capsys.readouterr().out
    assert (tmp_path / "out" / "heldout.messages.jsonl").exists()
    bad = _verdicts(tmp_path / "bad.jsonl", score=0)
    assert main(base + ["--verdicts", bad]) == 2
    assert "bad.jsonl:40 field 'score': expected an integer score 1..10, got 0" in capsys.readouterr().err


def test_cli_critic_data_rule_teacher_word_share(data_dir, tmp_path, capsys):
    from jaxwrite.cli import main
    from jaxwrite.prep.rule_teacher import GOOD_WORDS
    out = tmp_path / "out"
    assert main(["data", "critic-data", "--rule-teacher", "--rule", "word-share", "--rule-queries", "3",
                 "--rule-per-criterion", "2", "--allow-overlap", "--data-dir", str(data_dir),
                 "--output-dir", str(out)]) == 0
    recs = [json.loads(x) for x in open(out / "rule_verdicts.jsonl")]
    assert len(recs) == 30 and all(len(r["response"].split()) == 30 for r in recs)
    assert all(rule_verdict("", r["response"], None, rule="word-share")["score"] == r["score"] for r in recs)
    assert GOOD_WORDS[0] in json.load(open(out / "stats.json"))["teacher"]
