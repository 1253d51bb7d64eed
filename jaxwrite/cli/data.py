"""`jaxwrite data ACTION ...`: data preparation; each action is a thin call into data_pipelines.

Actions: clean (Gutenberg books -> documents jsonl + cleaning report), pairs (preference pairs, a
capped sample per prompt -> train/eval jsonl + stats), degraded-pairs (synthetic
passage-vs-degraded-copy pairs, same format), critic-sft (critic SFT records -> guarded, rendered
conversations), critic-data (teacher verdicts -> held-in/held-out critic SFT data in the official format),
build-sample (the data sample shipped in the package, rebuilt from a full data root).
"""
from __future__ import annotations

import json
import os

from jaxwrite.cli._eval_writingbench import add_answer_extraction_args
from jaxwrite.common import InputError, write_jsonl
from jaxwrite.common.data_dir import DATA_DIR_HELP


def register(subparsers) -> None:
    parser = subparsers.add_parser("data", help="prepare data sets (clean corpora, preference pairs, critic SFT)")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    # `data criteria` is the same command as `prep criteria` (model-labelled WritingBench criteria).
    from jaxwrite.cli._data_download import register_download
    from jaxwrite.cli._data_prep import add_criteria
    for add in (_add_clean, _add_pairs, _add_degraded_pairs, _add_critic_sft, _add_critic_data, add_criteria,
                register_download, _add_build_sample):
        add(actions)


def _data_dir(args, *needs: str) -> str:
    """The data root by the one data-dir rule, holding `needs`. These actions make training data, so the
    embedded sample (a few items) is taken only when named: `--data-dir sample`."""
    from jaxwrite.common import find_data_dir
    return str(find_data_dir(args.data_dir, needs))


def _write_json(path: str, obj) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=2)


# --- clean ---------------------------------------------------------------------------------------

def _add_clean(actions) -> None:
    p = actions.add_parser("clean", help="strip Gutenberg headers/BOM/CRLF/illustrations; split into documents")
    p.add_argument("--input", nargs="+", required=True, help="book .txt files, or corpus folders (pg*.txt)")
    p.add_argument("--output", required=True, help="documents jsonl: {id, text} per line")
    p.add_argument("--report", help="cleaning report json (default: OUTPUT + .report.json)")
    p.add_argument("--max-chars", type=int, default=20_000, help="most characters per document")
    p.set_defaults(func=_run_clean)


def _run_clean(args) -> int:
    from data_pipelines import clean_files, corpus_files
    paths = []
    for item in args.input:
        paths.extend(corpus_files(item) if os.path.isdir(item) else [item])
    for path in paths:
        if not os.path.exists(path):
            raise InputError("file not found", path=path)
    docs, report = clean_files(paths, args.max_chars)
    write_jsonl(args.output, ({"id": i, "text": t} for i, t in docs))
    report_path = args.report or args.output + ".report.json"
    _write_json(report_path, report.to_dict())
    print(f"{len(paths)} files, {report.bytes_before} -> {report.bytes_after} bytes, "
          f"{report.documents} documents, {report.empty_files} empty files; report: {report_path}")
    return 0


# --- pairs ---------------------------------------------------------------------------------------

def _add_pairs(actions) -> None:
    p = actions.add_parser("pairs", help="WritingPreferenceBench pairs split by prompt, with a length baseline")
    p.add_argument("--data-dir", help="shared data root " + DATA_DIR_HELP)
    p.add_argument("--output", required=True, help="folder for train.jsonl, eval.jsonl, stats.json")
    p.add_argument("--min-delta", type=float, default=1.0, help="least difference of mean human scores")
    p.add_argument("--eval-fraction", type=float, default=0.1, help="fraction of prompts held out")
    p.add_argument("--max-pairs-per-prompt", type=int, default=10,
                   help="keep a seeded sample of at most N pairs per prompt (0: all; the pool gives ~100 a "
                        "prompt, 20,287 pairs and over 200 MB uncapped); the count capped is reported")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_run_pairs)


def _run_pairs(args) -> int:
    import data_pipelines as dp
    from data_pipelines.preferences import POOL_PATH
    if args.max_pairs_per_prompt < 0:   # checked before the pool is read
        raise InputError(f"--max-pairs-per-prompt: expected 0 (keep all pairs) or a positive cap per prompt, "
                         f"got {args.max_pairs_per_prompt}")
    groups = dp.load_scored_responses(os.path.join(_data_dir(args, POOL_PATH), POOL_PATH))
    found = dp.make_pairs(groups, args.min_delta)
    pairs, capped = dp.cap_per_prompt(found, args.max_pairs_per_prompt, args.seed)
    train, evaluation = dp.split_by_prompt(pairs, args.eval_fraction, args.seed)
    stats = {"prompts": len(groups), "responses": sum(len(g) for g in groups.values()), "pairs_found": len(found),
             "max_pairs_per_prompt": args.max_pairs_per_prompt, "capped": capped, "pairs": len(pairs),
             "min_delta": args.min_delta, "eval_fraction": args.eval_fraction, "seed": args.seed}
    for name, split in (("train", train), ("eval", evaluation)):
        write_jsonl(os.path.join(args.output, f"{name}.jsonl"), (p.to_dict() for p in split))
        stats[name] = {"pairs": len(split), "prompts": len({p.question_id for p in split}),
                       "length_baseline_accuracy": dp.length_baseline_accuracy(split)}
    _write_json(os.path.join(args.output, "stats.json"), stats)
    print(json.dumps({k: stats[k] for k in ("pairs_found", "capped", "pairs", "train", "eval")}, ensure_ascii=False))
    if capped:
        print(f"capped {capped} of {len(found)} pairs: at most {args.max_pairs_per_prompt} per prompt "
              "(--max-pairs-per-prompt 0 keeps all)")
    return 0


# --- degraded-pairs ------------------------------------------------------------------------------

def _add_degraded_pairs(actions) -> None:
    p = actions.add_parser("degraded-pairs", help="SYNTHETIC pairs: corpus passage vs a degraded copy "
                                                  "(shuffle/scramble/repeat/truncate), whole books held out")
    p.add_argument("--data-dir", help="shared data root holding the corpus folders " + DATA_DIR_HELP)
    p.add_argument("--output", required=True, help="folder for train.jsonl, eval.jsonl, stats.json")
    p.add_argument("--corpora", nargs="+", default=["corpus_en", "corpus_zh"], help="corpus folders (*_en, *_zh)")
    p.add_argument("--degradations", nargs="+", default=None, help="kinds to use (default: all)")
    p.add_argument("--passages-per-book", type=int, default=200)
    p.add_argument("--eval-fraction", type=float, default=0.2, help="fraction of each corpus's books held out")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_run_degraded_pairs)


def _run_degraded_pairs(args) -> int:
    from data_pipelines.degraded_pairs import KINDS, build_degraded_pairs
    train, evaluation, stats = build_degraded_pairs(
        _data_dir(args, *args.corpora), tuple(args.corpora), tuple(args.degradations or KINDS), args.passages_per_book,
        args.eval_fraction, args.seed)
    stats.update({"corpora": args.corpora, "degradations": list(args.degradations or KINDS),
                  "passages_per_book": args.passages_per_book, "eval_fraction": args.eval_fraction,
                  "seed": args.seed})
    for name, split in (("train", train), ("eval", evaluation)):
        write_jsonl(os.path.join(args.output, f"{name}.jsonl"), (p.to_dict() for p in split))
    _write_json(os.path.join(args.output, "stats.json"), stats)
    print(json.dumps({"synthetic": True, "eval_books": stats["eval_books"],
                      **{k: {f: stats[k][f] for f in ("pairs", "length_baseline_accuracy")}
                         for k in ("train", "eval")}}, ensure_ascii=False))
    return 0


# --- critic-sft ----------------------------------------------------------------------------------

def _add_critic_sft(actions) -> None:
    p = actions.add_parser("critic-sft", help="render critic SFT records with the WritingBench critic prompt, "
                                              "refusing benchmark-contaminated records")
    p.add_argument("--input", required=True, help="jsonl of {query, response, criterion, score, reason} "
                                                  "(or already rendered {messages}, guarded again)")
    p.add_argument("--output", required=True, help="jsonl of {messages: [system, user, assistant]}, which "
                                                   "the critic_sft recipes train on (--config.data.train_path)")
    p.add_argument("--data-dir", help="shared data root holding writingbench/ " + DATA_DIR_HELP)
    p.add_argument("--on-overlap", choices=("error", "drop"), default="error",
                   help="what to do with records overlapping a WritingBench query")
    p.add_argument("--allow-overlap", action="store_true",
                   help="keep overlapping records (counted); only when you are sure")
    p.add_argument("--threshold", type=float, default=0.8, help="n-gram overlap coefficient that flags a record")
    p.set_defaults(func=_run_critic_sft)


def _run_critic_sft(args) -> int:
    from data_pipelines import ContaminationGuard, critic_sft_conversations
    writingbench = os.path.join(_data_dir(args, "writingbench"), "writingbench")
    guard = ContaminationGuard.from_writingbench(os.path.join(writingbench, "benchmark_all.jsonl"),
                                                 threshold=args.threshold)
    conversations, stats = critic_sft_conversations(args.input, guard, args.on_overlap, args.allow_overlap)
    write_jsonl(args.output, ({"messages": m + [{"role": "assistant", "content": c}]} for m, c in conversations))
    _write_json(args.output + ".stats.json", stats)
    print(json.dumps(stats))
    return 0


# --- critic-data ---------------------------------------------------------------------------------

def _add_critic_data(actions) -> None:
    p = actions.add_parser("critic-data", help="teacher verdicts -> critic SFT data (official critic format), "
                                               "split by query into train / heldout")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--verdicts", help="jsonl of {query, response, criterion, score, reason} (any judge)")
    src.add_argument("--critic-scores", help="`jaxwrite prep critic-score` output (needs --criteria, --responses)")
    src.add_argument("--rule-teacher", action="store_true",
                     help="make verdicts with the transparent rule teacher (NOT a model) on WritingBench queries")
    p.add_argument("--criteria", help="the criteria file critic-score scored against")
    p.add_argument("--responses", help="the responses file critic-score scored")
    add_answer_extraction_args(p, " (with --critic-scores: the mode critic-score ran with, so each verdict "
                                  "keeps the text the critic saw)")
    p.add_argument("--rule-queries", type=int, default=60, help="rule teacher: WritingBench queries used")
    p.add_argument("--rule-per-criterion", type=int, default=4, help="rule teacher: responses per criterion")
    # No choices= from RULES here: importing jaxwrite.prep starts JAX while the parser is built, before
    # quiet_libtpu runs; the handler's get_rule names the valid rules when the name is wrong.
    p.add_argument("--rule", default="cjk-share",
                   help="rule teacher: cjk-share (CJK characters, for a small SentencePiece vocabulary) or "
                        "word-share (English words, for a pretrained byte-level BPE model)")
    p.add_argument("--output-dir", required=True, help="folder for train/heldout .jsonl, .messages.jsonl, stats.json")
    p.add_argument("--data-dir", help="shared data root holding writingbench/ " + DATA_DIR_HELP)
    p.add_argument("--heldout-fraction", type=float, default=0.1, help="fraction of queries held out")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--on-overlap", choices=("error", "drop"), default="error",
                   help="training records overlapping a WritingBench query")
    p.add_argument("--allow-overlap", action="store_true", help="keep overlapping training records (counted)")
    p.add_argument("--threshold", type=float, default=0.8, help="n-gram overlap coefficient that flags a record")
    p.set_defaults(func=_run_critic_data)


def _run_critic_data(args) -> int:
    import data_pipelines as dp
    writingbench = os.path.join(_data_dir(args, "writingbench"), "writingbench")
    teacher = "as given in the verdicts file"
    if args.verdicts:
        source, records = args.verdicts, dp.read_verdicts(args.verdicts)
    elif args.critic_scores:
        if not (args.criteria and args.responses):
            raise InputError("--critic-scores needs --criteria and --responses (the files it scored)")
        source, teacher = args.critic_scores, "the critic of `jaxwrite prep critic-score`"
        records = dp.verdicts_from_critic_scores(args.critic_scores, args.criteria, args.responses,
                                                 answer_extraction=args.answer_extraction)
    else:
        from jaxwrite.prep.rule_teacher import rule_verdicts, teacher_text
        source, teacher = os.path.join(args.output_dir, "rule_verdicts.jsonl"), teacher_text(args.rule)
        verdicts = rule_verdicts(_data_dir(args, "writingbench"), args.rule_queries, args.rule_per_criterion,
                                 args.seed, args.rule)
        write_jsonl(source, verdicts)
        records = dp.read_verdicts(source)
    guard = dp.ContaminationGuard.from_writingbench(os.path.join(writingbench, "benchmark_all.jsonl"),
                                                    threshold=args.threshold)
    stats = dp.build_critic_data(records, args.output_dir, source=source,
                                 heldout_fraction=args.heldout_fraction, seed=args.seed, guard=guard,
                                 on_overlap=args.on_overlap, allow_overlap=args.allow_overlap, teacher=teacher)
    print(json.dumps({k: stats[k] for k in ("verdicts", "guard", "train", "heldout")}, ensure_ascii=False))
    print(f"train with --config.data.train_path={os.path.join(args.output_dir, 'train.jsonl')} "
          f"--config.data.num_records={stats['train']['records']}")
    return 0


# --- build-sample --------------------------------------------------------------------------------

def _add_build_sample(actions) -> None:
    p = actions.add_parser("build-sample", help="rebuild the data sample shipped in the package "
                                                "(jaxwrite/sample_data) from a full data root, byte for byte")
    p.add_argument("--source", required=True, help="a full data root (writingbench/, corpus_en/, ...)")
    p.add_argument("--output", required=True, help="the sample folder (e.g. jaxwrite/sample_data); its "
                                                   "README.md is kept")
    p.set_defaults(func=_run_build_sample)


def _run_build_sample(args) -> int:
    from data_pipelines.sample_data import build_sample
    sizes = build_sample(args.source, args.output)
    print(json.dumps({"files": len(sizes), "bytes": sum(sizes.values()), "sizes": sizes}, indent=1))
    return 0
