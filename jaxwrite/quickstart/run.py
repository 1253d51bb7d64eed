"""The quickstart: every piece of jaxwrite once, at tiny scale, on a CPU, ending in one report.

Steps (each resumable: re-running skips what is done):
  1. GRPO the LongWriter-Zero way (configs/grpo_tiny.py): trains a SentencePiece tokenizer and a tiny
     continual-pretraining run on the corpora (with think/answer documents), a tiny Bradley–Terry RM on
     WritingPreferenceBench pairs, then GRPO steps with the length, writing-RM and format rewards.
  2. Generates answers with the GRPO policy for a WritingBench sample and a LongBench-Write sample.
  3. Scores WritingBench with the official critic prompt and parse rule through a LOCAL judge (the tiny
     policy itself with JSON-constrained decoding: a pipeline check, not the official critic) and
     LongBench-Write's length score S_l.
  4. Writes <workdir>/report.md and report.html with the training curves and benchmark plots.
"""
from __future__ import annotations

import json
import os
import sys

from jaxwrite.common import InputError, append_jsonl, read_done_ids
from jaxwrite.quickstart.curves import last_value, plot_metrics

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_NEEDED = ("writingbench", "longbench_write", "corpus_en", "corpus_zh", "preferences")


def _check_data_dir(data_dir: str) -> None:
    missing = [d for d in _NEEDED if not os.path.isdir(os.path.join(data_dir, d))]
    if missing:
        raise InputError(f"data directory lacks {', '.join(missing)}; pass --data-dir DIR (the folder holding "
                         f"writingbench/, corpus_en/, ...) or fetch it with `jaxwrite data download --output DIR`",
                         path=data_dir)


def _grpo(data_dir: str, workdir: str, steps: int, progress: bool) -> tuple[str, str]:
    from jaxwrite.common import load_config
    from jaxwrite.rl import prepare_grpo
    from jaxwrite.train import train

    config = load_config(os.path.join(_REPO, "configs", "grpo_tiny.py"))
    config.data_dir, config.num_steps, config.progress_bar = data_dir, steps, progress
    config.checkpoint_every = max(1, steps // 2)
    grpo_dir = os.path.join(workdir, "grpo")
    config = prepare_grpo(config, grpo_dir)
    if train(config, grpo_dir):
        raise RuntimeError("GRPO run stopped early")
    return grpo_dir, config.rl.template


def _generate(engine, prompts: dict[int, str], out_path: str, template: str, max_new_tokens: int,
              temperature: float, top_p: float, top_k: int | None) -> None:
    """Generates with the policy's rollout template; writes {"index", "response"} lines (resumable)."""
    from jaxwrite.infer import GenerationRequest, SamplingParams
    from jaxwrite.rl.rollout import prompt_ids
    from jaxwrite.text import STOP_STRING, parse_think_answer

    done = read_done_ids(out_path, "index")
    todo = [i for i in prompts if i not in done]
    if not todo:
        return
    protocol = template != "plain"
    requests = [GenerationRequest(prompt_ids(engine.tokenizer, prompts[i], template),
                                  SamplingParams(temperature=temperature, top_p=top_p, top_k=top_k,
                                                 max_new_tokens=max_new_tokens, seed=i,
                                                 stop=(STOP_STRING,) if protocol else ()))
                for i in todo]
    for index, (completion,) in zip(todo, engine.generate(requests)):
        answer = completion.text
        if protocol:   # only the answer is shown and scored (LongWriter-Zero)
            parsed = parse_think_answer(completion.text, think_prefilled=template == "base",
                                        stopped_at_answer_close=completion.matched_stop == STOP_STRING)
            answer = parsed.answer or completion.text
        append_jsonl(out_path, {"index": index, "response": answer, "finish_reason": completion.finish_reason})


def run_quickstart(data_dir: str, workdir: str, grpo_steps: int = 10, wb_queries: int = 6, lbw_items: int = 8,
                   progress: bool = True) -> dict:
    from jaxwrite.evals import (LocalJudge, load_longbench_write, load_writingbench, score_longbench_write,
                                score_writingbench, writingbench_report)
    from jaxwrite.infer import Engine, load_for_inference

    data_dir, workdir = os.path.abspath(data_dir), os.path.abspath(workdir)
    _check_data_dir(data_dir)
    os.makedirs(workdir, exist_ok=True)
    print(f"quickstart: 1/4 GRPO (tokenizer, continual pretraining, reward model, policy) in {workdir}/grpo",
          file=sys.stderr)
    grpo_dir, template = _grpo(data_dir, workdir, grpo_steps, progress)

    print("quickstart: 2/4 generating WritingBench and LongBench-Write samples", file=sys.stderr)
    model, tokenizer = load_for_inference(os.path.join(grpo_dir, "checkpoints"))
    engine = Engine(model, tokenizer, max_batch=16, max_context=8192)
    queries = load_writingbench(data_dir)
    # The shortest queries of each language, so the critic prompt fits the tiny model's reach.
    chosen = []
    for lang in ("en", "zh"):
        pool = sorted((q for q in queries.values() if q.lang == lang), key=lambda q: len(q.query))
        chosen += [q.index for q in pool[:(wb_queries + (lang == "en")) // 2]]
    wb_dir = os.path.join(workdir, "writingbench")
    wb_responses = os.path.join(wb_dir, "responses.jsonl")
    # WritingBench's generation settings (T 0.7, top-p 0.8, top-k 20), with a tiny token cap.
    _generate(engine, {i: queries[i].query for i in chosen}, wb_responses, template, 128, 0.7, 0.8, 20)
    items = load_longbench_write(data_dir, "longbench_write")
    shortest = sorted(items, key=lambda it: it.length)[:lbw_items]
    lbw_dir = os.path.join(workdir, "longbench_write")
    lbw_responses = os.path.join(lbw_dir, "responses.jsonl")
    _generate(engine, {it.index: it.prompt for it in shortest}, lbw_responses, template, 256, 0.5, 1.0, None)

    print("quickstart: 3/4 scoring with the local judge", file=sys.stderr)
    judge = LocalJudge(engine=engine, name="quickstart tiny policy (NOT the official critic)")
    wb = score_writingbench(wb_responses, judge, os.path.join(wb_dir, "scores.jsonl"), data_dir, strip_think=False,
                            indices=chosen, constrain_json=True, progress=progress)
    aggregate = wb["runs"][0]["aggregate"]
    note = ("Judge: the quickstart's tiny policy with JSON-constrained decoding, run locally. This checks the "
            "pipeline (official prompt, parse rule, aggregation); it is not the WritingBench critic.")
    writingbench_report(aggregate, wb_dir, judge_note=note)
    lbw = score_longbench_write(lbw_responses, lbw_dir, data_dir, subset="longbench_write", judge=None,
                                strip_think=False, progress=progress)

    print("quickstart: 4/4 report", file=sys.stderr)
    return _write(workdir, grpo_dir, aggregate, wb, lbw)


def _write(workdir, grpo_dir, aggregate, wb, lbw) -> dict:
    from jaxwrite.evals import Section, markdown_table, write_report
    from jaxwrite.rl import plot_reward_curves

    figs = os.path.join(workdir, "figures")
    os.makedirs(figs, exist_ok=True)
    cpt_metrics = os.path.join(grpo_dir, "policy_init", "metrics.jsonl")
    rm_metrics = os.path.join(grpo_dir, "rm", "metrics.jsonl")
    grpo_metrics = os.path.join(grpo_dir, "metrics.jsonl")
    cpt_png = plot_metrics(cpt_metrics, ("loss", "eval/loss"), os.path.join(figs, "cpt_loss.png"),
                           "continual pretraining: train / held-out loss")
    rm_png = plot_metrics(rm_metrics, ("accuracy", "eval/accuracy", "eval/length_baseline_accuracy"),
                          os.path.join(figs, "rm_accuracy.png"), "reward model: pairwise accuracy")
    grpo_png = os.path.join(figs, "grpo_rewards.png")
    plot_reward_curves(grpo_metrics, grpo_png)
    summary = {
        "cpt_eval_loss": last_value(cpt_metrics, "eval/loss"),
        "rm_eval_accuracy": last_value(rm_metrics, "eval/accuracy"),
        "rm_eval_length_baseline": last_value(rm_metrics, "eval/length_baseline_accuracy"),
        "grpo_length_reward": last_value(grpo_metrics, "reward/length/mean"),
        "grpo_format_reward": last_value(grpo_metrics, "reward/format/mean"),
        "grpo_writing_rm_reward": last_value(grpo_metrics, "reward/writing_rm/mean"),
        "writingbench": {k: aggregate[k] for k in ("overall", "count")},
        "writingbench_judge": wb["runs"][0].get("judge", wb.get("judge")),
        "longbench_write_S_l": lbw.get("S_l"),
    }
    wb_figs = tuple(p for p in [os.path.join(workdir, "writingbench", "writingbench_domains.png")]
                    if os.path.exists(p))
    lbw_figs = tuple(os.path.join(workdir, "longbench_write", f) for f in sorted(os.listdir(
        os.path.join(workdir, "longbench_write"))) if f.endswith(".png"))
    sections = [
        Section("Continual pretraining", "Tiny model on the local corpora (LongWriter-Zero mix weights over the "
                "components present); held-out loss on two books kept out of training.",
                tuple(f for f in [cpt_png] if f)),
        Section("Bradley–Terry writing reward model",
                markdown_table(["held-out accuracy", "length-only baseline"],
                               [[summary["rm_eval_accuracy"], summary["rm_eval_length_baseline"]]]),
                tuple(f for f in [rm_png] if f)),
        Section("GRPO (length, writing RM, format rewards)", "Raw reward means, answer lengths and batch health "
                "per step; at this scale the curve shows the machinery, not writing quality.", (grpo_png,)),
        Section("WritingBench sample", f"{aggregate['count']} queries scored (full report: writingbench/report.md). "
                "Judge: the tiny policy run locally with JSON-constrained decoding (a pipeline check, "
                "NOT the official critic).", wb_figs),
        Section("LongBench-Write sample", f"Length score S_l = {summary['longbench_write_S_l']:.1f} "
                "(quality S_q needs a judge: `jaxwrite eval longbench-write score --judge-url ...`).", lbw_figs),
    ]
    paths = write_report(workdir, "jaxwrite quickstart", summary, sections)
    print(json.dumps(summary, ensure_ascii=False, default=str))
    print(f"quickstart: report at {paths['markdown']} and {paths['html']}", file=sys.stderr)
    return summary
