"""The critic learns, at tiny scale: rule-teacher verdicts -> critic SFT data -> tiny critic -> held-out
scores through the WritingBench critic call -> agreement with the teacher, plus a control critic
trained on the same records with the teacher's verdicts shuffled across them (it must stay near ρ = 0).

Scoring: official prompt (`critic_request`) and parse rule (`parse_critic_output`), run by a LocalJudge
in score-logit mode (NON-OFFICIAL: the verdict is forced up to `{"score": ` and the score is the argmax
of the next-token distribution over 1..10), which makes every verdict parseable in one prefill.

The demo's queries are WritingBench queries, so the contamination guard is set to allow and count
them (like WritingBench's own critic data); the demo critic never reports a benchmark score.

Teacher: `jaxwrite.prep.rule_teacher` (a transparent rule, labelled as such: the share of the
response's characters in a 10-character set, demo scores 2, 6, 10). Tokenizer: a 2,048-piece
SentencePiece over the training conversations, each response character one token.

Defaults: 20 queries × their criteria × 6 = 600 verdicts, 420 held-in / 180 held-out by query,
100 steps × batch 4, random init, seed 0 (`run_critic_demo(data_dir, workdir)`). What these settings
measured, and the settings that did not learn, are in docs/BENCHMARKS.md ("Critic SFT").
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

from jaxwrite.common import load_config, read_jsonl, write_jsonl

# The official prompt at the demo's shortest queries is 1,110-1,550 tokens with the demo tokenizer (the
# template and the criterion, printed twice, are ~1,050 of them): one example per 1,600-token row, unpacked.
# lr 1e-2 (floor 30 %) learns the verdict format in ~30 steps (3e-3 needed ~60), leaving the rest for
# the score digit (figures: docs/BENCHMARKS.md).
DEMO_OVERRIDES = ("--config.data.seq_len=1600", "--config.data.pack=False", "--config.data.batch_size=4",
                  "--config.optimizer.learning_rate=0.01", "--config.optimizer.min_lr_ratio=0.3",
                  "--config.optimizer.warmup_steps=10",
                  "--config.log_every=10")
TEST_SIZE = {"steps": 80, "num_queries": 20, "per_criterion": 3}   # tests/test_critic_learns.py
SCORING = "LocalJudge score_logit (non-official): official critic prompt + parse rule, argmax over 1..10"


def _tokenizer(out_dir: str, train_records: str) -> str:
    """A small SentencePiece vocabulary over the rendered training conversations, so the long official
    prompt costs few tokens (the demo's CPU time is mostly prompt length)."""
    from jaxwrite.prompts import critic_messages, critic_verdict
    from jaxwrite.text import train_sentencepiece
    if not os.path.exists(os.path.join(out_dir, "tokenizer.model")):
        text = os.path.join(os.path.dirname(out_dir), "tokenizer_text.txt")
        with open(text, "w", encoding="utf-8") as f:
            for _, rec in read_jsonl(train_records):
                # The response one character per line: the rule is per character, so each response
                # character stays one token (random character strings would otherwise merge into pieces).
                system, user = (m["content"] for m in critic_messages(rec["query"], rec["criterion"], ""))
                f.write("\n".join([system, user, *rec["response"],
                                   critic_verdict(rec["score"], rec["reason"])]) + "\n")
        train_sentencepiece([text], out_dir, 2048)
    return out_dir


def _shuffled(train_path: str, out_path: str, seed: int) -> str:
    """The control: each record gets another record's (score, reason), one seeded permutation."""
    recs = [r for _, r in read_jsonl(train_path)]
    perm = np.random.default_rng(seed + 1).permutation(len(recs))
    write_jsonl(out_path, ({**rec, "score": recs[j]["score"], "reason": recs[j]["reason"]}
                           for rec, j in zip(recs, perm)))
    return out_path


def train_tiny_critic(data_dir: str, train_path: str, workdir: str, tokenizer: str, steps: int, seed: int = 0,
                      init_checkpoint: str | None = None, overrides: tuple[str, ...] = ()) -> str:
    """configs/critic_sft_tiny.py through the normal train API; returns the checkpoint directory."""
    from jaxwrite.train import train
    config = load_config("critic_sft_tiny", list(DEMO_OVERRIDES + tuple(overrides)))
    config.data_dir, config.data.train_path, config.tokenizer.path = data_dir, train_path, tokenizer
    config.num_steps, config.seed, config.progress_bar = steps, seed, False
    config.checkpoint_every = config.eval_every = steps
    config.data.allow_overlap = True     # WritingBench queries, allowed and counted (see module docstring)
    if init_checkpoint:
        config.model.init_from = init_checkpoint
    if train(config, workdir):
        raise RuntimeError(f"critic training stopped early in {workdir}")
    return os.path.join(workdir, "checkpoints")


def score_heldout(checkpoint: str, heldout_path: str) -> list[int | None]:
    """The trained critic's score for each held-out record (None = unparseable, never a default)."""
    from jaxwrite.evals import LocalJudge
    from jaxwrite.evals.writingbench_critic import critic_request, parse_critic_output
    judge = LocalJudge(model=checkpoint, mode="score_logit", max_batch=16)
    recs = [r for _, r in read_jsonl(heldout_path)]
    results = judge.chat([critic_request(r["query"], r["criterion"], r["response"], seed=i)
                          for i, r in enumerate(recs)])
    return [(parse_critic_output(res.text) or (None,))[0] if res.ok else None for res in results]


def run_critic_demo(data_dir: str, workdir: str, init_checkpoint: str | None = None, steps: int = 100,
                    seed: int = 0, num_queries: int = 20, per_criterion: int = 6, heldout_fraction: float = 0.2,
                    control: bool = True, overrides: tuple[str, ...] = (), tokenizer: str | None = None,
                    rule: str = "cjk-share") -> dict:
    """End to end (see module docstring); returns the agreement figures, the control's and the counts.
    `tokenizer` (any tokenizer spec, e.g. `pinned:NAME`) replaces the demo's own: the init checkpoint's
    copy, or a SentencePiece trained on the records for a random init. `rule` names the rule teacher's
    rule (`jaxwrite.prep.rule_teacher.RULES`; `word-share` for a byte-level BPE model)."""
    from data_pipelines import build_critic_data, read_verdicts
    from jaxwrite.evals.critic_agreement import score_agreement
    from jaxwrite.prep.rule_teacher import rule_verdicts, teacher_text

    start = time.time()
    data_dir, workdir = os.path.abspath(data_dir), os.path.abspath(workdir)
    os.makedirs(workdir, exist_ok=True)
    verdicts_path = os.path.join(workdir, "verdicts.jsonl")
    write_jsonl(verdicts_path, rule_verdicts(data_dir, num_queries, per_criterion, seed, rule))
    data = os.path.join(workdir, "critic_data")
    stats = build_critic_data(read_verdicts(verdicts_path), data, source=verdicts_path,
                              heldout_fraction=heldout_fraction, seed=seed, teacher=teacher_text(rule))
    train_path, heldout_path = os.path.join(data, "train.jsonl"), os.path.join(data, "heldout.jsonl")
    if tokenizer is None and not init_checkpoint:
        tokenizer = _tokenizer(os.path.join(workdir, "tokenizer"), train_path)
    elif tokenizer is None:
        from jaxwrite.checkpoint import tokenizer_dir_of
        tokenizer = tokenizer_dir_of(init_checkpoint)
    teacher = [r["score"] for _, r in read_jsonl(heldout_path)]

    def run(name: str, path: str) -> dict:
        t = time.time()
        ckpt = train_tiny_critic(data_dir, path, os.path.join(workdir, name), tokenizer, steps, seed,
                                 init_checkpoint, overrides)
        scores = score_heldout(ckpt, heldout_path)
        write_jsonl(os.path.join(workdir, f"{name}_heldout_scores.jsonl"),
                    ({"critic": c, "teacher": tr} for c, tr in zip(scores, teacher)))
        print(f"critic demo: {name} trained and scored in {time.time() - t:.0f}s", file=sys.stderr)
        return score_agreement(scores, teacher)

    result = {**run("critic", train_path), "n_train": stats["train"]["records"],
              "n_heldout": stats["heldout"]["records"], "teacher": "rule: " + teacher_text(rule), "scoring": SCORING,
              "steps": steps, "seed": seed, "init_checkpoint": init_checkpoint or "random init"}
    if control:
        ctrl = run("control_shuffled", _shuffled(train_path, os.path.join(data, "train_shuffled.jsonl"), seed))
        result["control_shuffled"] = {k: ctrl[k] for k in ("spearman", "exact", "within1", "parseable")}
    result["seconds"] = round(time.time() - start, 1)
    from jaxwrite.evals.report_json import write_json
    write_json(os.path.join(workdir, "critic_demo.json"), result, indent=2)  # a constant critic's ρ is NaN: null
    return result


def critic_demo_markdown(result: dict) -> str:
    """The report paragraph for `run_critic_demo`'s result (the teacher and scoring mode named)."""
    def f(x):
        return "n/a" if x is None or x != x else f"{x:.3f}"
    text = (f"Teacher: {result['teacher']}. A tiny critic trained ({result['steps']} steps, "
            f"{result['init_checkpoint']}) on {result['n_train']} held-in verdicts scored {result['n_heldout']} "
            f"held-out (query, response, criterion) triples with the official critic prompt and parse rule "
            f"({result['scoring']}): Spearman ρ = {f(result['spearman'])}, exact = {f(result['exact'])}, "
            f"±1 = {f(result['within1'])}, parseable = {f(result['parseable'])}.")
    ctrl = result.get("control_shuffled")
    if ctrl:
        text += (f" Control (same records, teacher verdicts shuffled across them): ρ = {f(ctrl['spearman'])}, "
                 f"exact = {f(ctrl['exact'])}, ±1 = {f(ctrl['within1'])}.")
    return text
