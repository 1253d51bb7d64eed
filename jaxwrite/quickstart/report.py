"""The quickstart's report: learning curves with first-5 vs last-5 means, the reward-model rows (synthetic
and real data), the critic's agreement with its teacher, and the benchmark samples."""
from __future__ import annotations

import json
import os
import sys

from jaxwrite.quickstart.curves import last_value, plot_metrics

WINDOW = 5   # steps averaged at each end of the GRPO run to say whether it learnt


def _rm_row(name: str, trained_on: str, metrics: str) -> list:
    acc = last_value(metrics, "eval/accuracy")
    base = last_value(metrics, "eval/length_baseline_accuracy")
    margin = None if acc is None or base is None else acc - base
    return [name, trained_on, acc, base, margin]


def _learning_rows(grpo_metrics: str) -> tuple[list[list], dict]:
    from jaxwrite.rl.plots import first_last_means

    means = first_last_means(grpo_metrics, window=WINDOW)
    rows = [[key, first, last, last - first] for key, (first, last) in means.items()]
    return rows, {key: {"first5": first, "last5": last} for key, (first, last) in means.items()}


def _run_section(run_info: dict):
    """Which data and which sizes the figures below come from (the embedded sample and --smallest say so)."""
    from jaxwrite.evals import Section
    data = (f"the embedded sample ({run_info['data_dir']}: a few items of each data set; `jaxwrite data "
            "download` fetches the full data)" if run_info.get("embedded_sample") else run_info["data_dir"])
    mode = ("smallest (`--smallest`): every step once with the least work that runs it, a check that the "
            "install works; the figures below are not results" if run_info.get("mode") == "smallest"
            else "default (the sizes whose figures docs/BENCHMARKS.md records)")
    model = (f"\n\nModel: `--model {run_info['model']}`, a real instruct model's weights (GRPO from it after a "
             "protocol warm-up; the tiny reward-model and critic rows are not run)" if run_info.get("model") else "")
    return Section("Run", f"Data: {data}.\n\nMode: {mode}.{model}")


def write_quickstart_report(workdir: str, grpo_dir: str, rm_real_metrics: str | None, critic: dict | None,
                            aggregate: dict, wb: dict, lbw: dict, seconds: dict, run_info: dict | None = None) -> dict:
    """`rm_real_metrics` and `critic` are None in a --model run (those rows are the tiny default's)."""
    from jaxwrite.evals import Section, markdown_table, write_report
    from jaxwrite.evals.judging import answer_extraction_markdown, judging_markdown
    from jaxwrite.quickstart.critic_demo import critic_demo_markdown
    from jaxwrite.rl import plot_reward_curves, step_time_rows

    figs = os.path.join(workdir, "figures")
    os.makedirs(figs, exist_ok=True)
    cpt_metrics = os.path.join(grpo_dir, "policy_init", "metrics.jsonl")
    rm_metrics = os.path.join(grpo_dir, "rm", "metrics.jsonl")
    grpo_metrics = os.path.join(grpo_dir, "metrics.jsonl")
    cpt_png = plot_metrics(cpt_metrics, ("loss", "eval/loss"), os.path.join(figs, "cpt_loss.png"),
                           "continual pretraining: train / held-out loss")
    rm_png = plot_metrics(rm_metrics, ("accuracy", "eval/accuracy", "eval/length_baseline_accuracy"),
                          os.path.join(figs, "rm_accuracy.png"), "reward model (synthetic pairs): accuracy")
    grpo_png = os.path.join(figs, "grpo_rewards.png")
    plot_reward_curves(grpo_metrics, grpo_png)
    learning_rows, learning = _learning_rows(grpo_metrics)
    time_rows, figure_rows = step_time_rows(grpo_metrics)
    rm_rows = [_rm_row("synthetic: passage vs degraded copy (shuffled words, repetition, truncation)",
                       "same kind, other books", rm_metrics)]
    if rm_real_metrics:
        rm_rows.append(_rm_row("real: WritingPreferenceBench (human scores differ by >= 1)",
                               "same set, other prompts", rm_real_metrics))
    real_model = (run_info or {}).get("model")
    summary = {
        "cpt_eval_loss": last_value(cpt_metrics, "eval/loss"),
        "grpo_learning": learning,
        "grpo_step_time": {label: value for label, value, _ in time_rows},
        "reward_model": {
            "synthetic_degraded_pairs": {"accuracy": rm_rows[0][2], "length_baseline": rm_rows[0][3]},
            **({"writingpreferencebench": {"accuracy": rm_rows[1][2], "length_baseline": rm_rows[1][3]}}
               if rm_real_metrics else {}),
        },
        "critic": critic and {k: critic.get(k) for k in ("spearman", "exact", "within1", "parseable", "n_train",
                                                          "n_heldout", "teacher", "scoring", "control_shuffled")},
        "writingbench": {k: aggregate[k] for k in ("overall", "count")},
        "writingbench_judge": wb["runs"][0].get("judge", wb.get("judge")),
        "writingbench_judging": wb.get("judging"),
        "longbench_write_judging": lbw.get("judging"),
        "writingbench_answer_extraction": wb.get("answer_extraction"),
        "longbench_write_S_l": lbw.get("S_l"),
        "longbench_write_malformed": lbw.get("malformed"),
        "stage_seconds": seconds,
        "total_seconds": round(sum(seconds.values()), 1),
        **(run_info or {}),
    }
    wb_figs = tuple(p for p in [os.path.join(workdir, "writingbench", "writingbench_domains.png")]
                    if os.path.exists(p))
    lbw_figs = tuple(os.path.join(workdir, "longbench_write", f) for f in sorted(os.listdir(
        os.path.join(workdir, "longbench_write"))) if f.endswith(".png"))
    s_l = summary["longbench_write_S_l"]
    extraction = wb.get("answer_extraction")
    sections = [_run_section(run_info)] if run_info else []
    warm_up = (Section("Protocol warm-up", f"{real_model}'s weights, a short SFT on chat records in the "
                       "think/answer protocol whose requests name no length (the length is left to GRPO); "
                       "training loss.", tuple(f for f in [cpt_png] if f)) if real_model else
               Section("Continual pretraining", "Tiny model on the local corpora (LongWriter-Zero mix weights "
                       "over the components present, with think/answer documents); held-out loss on two books "
                       "kept out of training.", tuple(f for f in [cpt_png] if f)))
    policy = f"the {real_model} policy" if real_model else "the tiny policy"
    sections += [
        warm_up,
        Section("GRPO learns (length, writing RM, format rewards; think/answer template)",
                f"Raw reward means and the well-formed fraction, mean of the first {WINDOW} vs the last "
                f"{WINDOW} steps (length-controlled prompts):\n\n"
                + markdown_table(["metric", f"first {WINDOW}", f"last {WINDOW}", "change"], learning_rows, 3),
                (grpo_png,)),
        Section("Where a GRPO step's time goes",
                "Mean per step after the first (which compiles), from the run's metrics.jsonl "
                "(`jaxwrite.rl.step_time_rows`; docs/GRPO.md says what each part measures):\n\n"
                + markdown_table(["part", "seconds", "share (of the step; rollout parts: of the rollout)"],
                                 time_rows, 3) + "\n\n"
                + markdown_table(["figure", "mean per step"], figure_rows, 3)),
        Section("Bradley–Terry reward model",
                "Held-out pairwise accuracy against the length-only baseline (prefer the longer response; "
                "ties count 1/2) on the same rows. The synthetic pairs are a learnable signal for a tiny model "
                "and are labelled as such; the GRPO run's writing reward uses that RM. "
                + ("The WritingPreferenceBench row is real human preference data, with its honest accuracy."
                   if rm_real_metrics else f"From {real_model}'s weights; the real-data row is the tiny "
                   "default's (`jaxwrite quickstart` without --model).") + "\n\n"
                + markdown_table(["pairs", "held out", "accuracy", "length baseline", "margin"],
                                 [[r[0], r[1], r[2], r[3], r[4]] for r in rm_rows], 3),
                tuple(f for f in [rm_png] if f)),
        Section("Critic SFT learns (rule teacher)", critic_demo_markdown(critic) if critic else
                "Not part of a --model run: the critic demo is the tiny default's (`jaxwrite quickstart`)."),
        Section("WritingBench sample", f"{aggregate['count']} queries scored (full report: writingbench/report.md), "
                f"answers by {policy}. Judge: "
                + (f"the {real_model} instruct model as fetched" if real_model else "the tiny policy")
                + " run locally (a pipeline check, NOT the official critic; how it judged: below)."
                + (f"\n\n{judging_markdown(wb['judging'])}" if wb.get("judging") else "")
                + ("\n\n" + answer_extraction_markdown(extraction) if extraction else ""), wb_figs),
        Section("LongBench-Write sample", ("Length score S_l = " + (f"{s_l:.1f}" if s_l is not None else "n/a")
                                           + " over the well-formed answers (quality S_q needs a judge: "
                                           "`jaxwrite eval longbench-write score --judge SPEC ...`).")
                + (f"\n\n{judging_markdown(lbw['judging'])}" if lbw.get("judging") else ""), lbw_figs),
        Section("Wall time", markdown_table(["stage", "seconds"], [[k, v] for k, v in seconds.items()]
                                            + [["total", summary["total_seconds"]]], 1)),
    ]
    paths = write_report(workdir, "jaxwrite quickstart", summary, sections)
    print(json.dumps(summary, ensure_ascii=False, default=str))
    print(f"quickstart: report at {paths['markdown']} and {paths['html']}", file=sys.stderr)
    return summary
