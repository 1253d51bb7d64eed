"""The model-labelled data preparation steps (jaxwrite.prep), as subcommands of a group:
criteria, responses, critic-score, filter, long-form. `jaxwrite prep` holds them all;
`jaxwrite data criteria` is the same criteria command (registered by cli/data.py)."""
from __future__ import annotations

import json
import os

from jaxwrite.cli._eval_writingbench import add_answer_extraction_args
from jaxwrite.cli._model_args import add_model_args, model_from_args
from jaxwrite.common import InputError
from jaxwrite.common.data_dir import DATA_DIR_HELP


# The output flags of the steps (argparse dests), refused as bucket paths: the steps write local files.
_OUTPUTS = ("output", "output_dir", "labels", "summary")


def register_prep_steps(actions) -> None:
    for add in (add_criteria, _add_responses, _add_critic_score, _add_filter, _add_long_form):
        add(actions)


def _local_outputs(func):
    """Refuses a bucket output in one line before any model loads or anything is written."""
    def run(args) -> int:
        from jaxwrite.common.remote import is_remote
        for name in _OUTPUTS:
            value = getattr(args, name, None)
            if value and is_remote(value):
                raise InputError(f"--{name.replace('_', '-')}: expected a local path: prep steps write local "
                                 "files only (generate and the eval commands take gs:// outputs); write locally "
                                 "and copy (gcloud storage cp), or use a gcsfuse mount", path=value)
        return func(args)
    return run


def _batch(args, role: str) -> int:
    """Records asked at once: as many as the model takes at once (--ROLE-concurrency)."""
    if getattr(args, f"{role}_concurrency") < 1:
        raise InputError(f"--{role}-concurrency: expected a positive integer")
    return getattr(args, f"{role}_concurrency")


def _sampling_args(p, temperature: float, top_p: float, top_k: int | None, max_tokens: int) -> None:
    p.add_argument("--temperature", type=float, default=temperature)
    p.add_argument("--top-p", type=float, default=top_p)
    p.add_argument("--top-k", type=int, default=top_k, help="omit for none")
    p.add_argument("--max-tokens", type=int, default=max_tokens)


def _reask_arg(p) -> None:
    p.add_argument("--reask", choices=("same", "fresh"), default="same",
                   help="after a rejected answer: re-ask in the same conversation naming the problem (falls back "
                        "to a fresh one when the generator cannot take it, e.g. past its context), or always "
                        "ask afresh with a new seed (for models too small to follow a correction)")


def _sampling(args):
    from jaxwrite.chat import SamplingParams
    return SamplingParams(temperature=args.temperature, top_p=args.top_p, top_k=args.top_k,
                          max_new_tokens=args.max_tokens)


def _print_summary(summary: dict, path: str | None) -> int:
    text = json.dumps(summary, ensure_ascii=False, indent=1)
    if path:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    print(text)
    return 0


# --- criteria ------------------------------------------------------------------------------------

def add_criteria(actions) -> None:
    p = actions.add_parser("criteria", help="write 5 query-specific criteria per query (WritingBench schema) "
                                            "with a generator model; jaxwrite's own prompt")
    p.add_argument("--queries", required=True, help="jsonl of {id, query, domain1?, domain2?, lang?}")
    p.add_argument("--output", required=True, help="criteria jsonl (resumable; failures beside it)")
    add_model_args(p, "generator", required=True, what="the model that writes the criteria")
    _sampling_args(p, 0.7, 0.8, None, 2048)
    p.add_argument("--attempts", type=int, default=3, help="asks per query (the first + re-asks on rejects)")
    _reask_arg(p)
    p.add_argument("--constrain-json", action="store_true",
                   help="ask a local engine for schema-constrained JSON (five criteria as an object)")
    p.add_argument("--summary", help="also write the summary JSON here")
    p.add_argument("--no-progress", dest="progress", action="store_false")
    p.set_defaults(func=_local_outputs(run_criteria))


def run_criteria(args) -> int:
    from jaxwrite.prep import Labelling, generate_criteria, load_queries
    settings = Labelling(sampling=_sampling(args), attempts=args.attempts, reask=args.reask,
                         constrain_json=args.constrain_json, batch_size=_batch(args, "generator"),
                         progress=args.progress)
    queries = load_queries(args.queries, "query")
    queries.warn_empty(args.queries, "query")
    summary = generate_criteria(queries, model_from_args(args, "generator"), args.output, settings)
    return _print_summary(summary, args.summary)


# --- responses -----------------------------------------------------------------------------------

def _add_responses(actions) -> None:
    p = actions.add_parser("responses", help="N teacher responses per query of a criteria file, excluding "
                                             "protected benchmark queries")
    p.add_argument("--criteria", required=True, help="criteria jsonl (from `criteria`)")
    p.add_argument("--output", required=True, help="responses jsonl (resumable)")
    p.add_argument("--num-samples", type=int, default=4, help="responses per query")
    add_model_args(p, "teacher", required=True, what="the model that writes the responses")
    _sampling_args(p, 0.7, 0.8, 20, 16_000)
    p.add_argument("--data-dir", help="shared data root holding writingbench/ " + DATA_DIR_HELP)
    p.add_argument("--on-overlap", choices=("error", "drop"), default="error",
                   help="queries overlapping a WritingBench query: fail, or drop them (counted)")
    p.add_argument("--allow-overlap", action="store_true", help="keep overlapping queries (counted)")
    p.add_argument("--threshold", type=float, default=0.8, help="n-gram overlap coefficient that flags a query")
    p.add_argument("--summary", help="also write the summary JSON here")
    p.add_argument("--no-progress", dest="progress", action="store_false")
    p.set_defaults(func=_local_outputs(run_responses))


def run_responses(args) -> int:
    from data_pipelines import ContaminationGuard
    from jaxwrite.common.data_dir import benchmark_dir
    from jaxwrite.prep import generate_responses
    benchmark = benchmark_dir(args.data_dir, "writingbench") / "benchmark_all.jsonl"
    guard = ContaminationGuard.from_writingbench(str(benchmark), threshold=args.threshold)
    summary = generate_responses(args.criteria, model_from_args(args, "teacher"), args.output,
                                 num_samples=args.num_samples,
                                 guard=guard, on_overlap=args.on_overlap, allow_overlap=args.allow_overlap,
                                 sampling=_sampling(args), batch_size=_batch(args, "teacher"), progress=args.progress)
    return _print_summary(summary, args.summary)


# --- critic-score --------------------------------------------------------------------------------

def _add_critic_score(actions) -> None:
    p = actions.add_parser("critic-score", help="score responses with the WritingBench critic against each "
                                                "query's own criteria")
    p.add_argument("--criteria", required=True)
    p.add_argument("--responses", required=True)
    p.add_argument("--output", required=True, help="scores jsonl (resumable; failures beside it)")
    add_model_args(p, "critic", required=True,
                   what="the critic (the WritingBench critic model for the paper's procedure)")
    add_answer_extraction_args(p)
    p.add_argument("--constrain-json", action="store_true", help="schema-constrained verdicts (changes the metric)")
    p.add_argument("--summary", help="also write the summary JSON here")
    p.add_argument("--no-progress", dest="progress", action="store_false")
    p.set_defaults(func=_local_outputs(run_critic_score))


def run_critic_score(args) -> int:
    from jaxwrite.prep import score_responses
    summary = score_responses(args.criteria, args.responses, model_from_args(args, "critic"), args.output,
                              answer_extraction=args.answer_extraction, batch_size=_batch(args, "critic"),
                              constrain_json=args.constrain_json, progress=args.progress)
    return _print_summary(summary, args.summary)


# --- filter --------------------------------------------------------------------------------------

def _add_filter(actions) -> None:
    p = actions.add_parser("filter", help="keep the top fraction of critic-scored responses per subdomain; "
                                          "write all.jsonl, kept.jsonl and a report")
    p.add_argument("--criteria", required=True)
    p.add_argument("--responses", required=True)
    p.add_argument("--scores", required=True)
    p.add_argument("--output-dir", required=True)
    p.add_argument("--fraction", type=float, default=0.5, help="fraction kept per subdomain (paper: 0.5)")
    p.add_argument("--rounding", choices=("floor", "ceil", "round_half_up"), default="floor")
    p.add_argument("--min-records", type=int, default=2, help="fewer records than this: too small to filter")
    p.add_argument("--on-small", choices=("error", "keep", "drop"), default="error",
                   help="what to do with subdomains too small to filter (always listed and counted)")
    p.add_argument("--group-field", default="domain2", help="criteria field to group by")
    p.set_defaults(func=_local_outputs(run_filter))


def run_filter(args) -> int:
    from jaxwrite.prep import build_filtered_sft
    if not 0 < args.fraction <= 1:
        raise InputError(f"--fraction: expected 0 < fraction <= 1, found {args.fraction}")
    summary = build_filtered_sft(args.criteria, args.responses, args.scores, args.output_dir,
                                 fraction=args.fraction, rounding=args.rounding, min_records=args.min_records,
                                 on_small=args.on_small, group_field=args.group_field)
    return _print_summary({k: v for k, v in summary.items() if k != "per_group"}, None)


# --- long-form -----------------------------------------------------------------------------------

def _add_long_form(actions) -> None:
    p = actions.add_parser("long-form", help="keep long-form writing prompts and give each a target word "
                                             "range; writes the GRPO prompt file")
    p.add_argument("--prompts", required=True, help="jsonl of {id, prompt}")
    p.add_argument("--labels", required=True, help="labels jsonl, one per prompt (resumable)")
    p.add_argument("--output", required=True, help="RL prompt file {id, prompt, lower, upper}")
    add_model_args(p, "labeller", required=True, what="the model that classifies prompts and predicts ranges")
    _sampling_args(p, 0.0, 1.0, None, 256)
    p.add_argument("--attempts", type=int, default=3)
    _reask_arg(p)
    p.add_argument("--on-conflict", choices=("explicit", "flag"), default="explicit",
                   help="an explicit length request in the prompt wins (default) or only flags a conflict")
    p.add_argument("--min-words", type=int, default=100)
    p.add_argument("--max-words", type=int, default=32_000)
    p.add_argument("--max-ratio", type=float, default=4.0, help="largest upper / lower accepted")
    p.add_argument("--constrain-json", action="store_true")
    p.add_argument("--summary", help="also write the summary JSON here")
    p.add_argument("--no-progress", dest="progress", action="store_false")
    p.set_defaults(func=_local_outputs(run_long_form))


def run_long_form(args) -> int:
    from jaxwrite.prep import Labelling, LengthBounds, label_long_form, load_queries
    if not 0 < args.min_words <= args.max_words or args.max_ratio < 1:
        raise InputError("expected 0 < --min-words <= --max-words and --max-ratio >= 1")
    settings = Labelling(sampling=_sampling(args), attempts=args.attempts, reask=args.reask,
                         constrain_json=args.constrain_json, batch_size=_batch(args, "labeller"),
                         progress=args.progress)
    prompts = load_queries(args.prompts, "prompt")
    prompts.warn_empty(args.prompts, "prompt")
    summary = label_long_form(prompts, model_from_args(args, "labeller"), args.labels, args.output, settings,
                              bounds=LengthBounds(args.min_words, args.max_words, args.max_ratio),
                              on_conflict=args.on_conflict)
    return _print_summary(summary, args.summary)
