"""`jaxwrite generate`: sample responses for a jsonl of prompts, written as they finish, resumable.

Input lines: an id (`--id-field`, default `index` when present else `id`) and one of `messages`
(chat list), `query` or `prompt` (a single user turn, rendered with the model's chat template unless
`--no-chat-template`). Benchmark files are read as shipped: with `--preset longbench-write`, a file
without ids (LongBench-Write's, LongWrite-Ruler's) is numbered 1, 2, ... in line order and written as
`index`, the key `eval longbench-write score` reads; WritingBench's benchmark_all.jsonl carries `index`
and `query` already. Output lines: `{id: ..., "response": str, "finish_reason": ...}` (with
`--num-samples > 1`: `"responses"` and `"finish_reasons"` lists), appended as each prompt finishes;
a re-run skips ids already in the output. With `--think-answer`, `response` is the answer only (the
scorers' one extraction rule), `plan` the <think> block, `raw_response` the full text, and
`well_formed` / `problems` say whether it held exactly one <think> then one non-empty <answer>; a
malformed output keeps the raw text in `response` with `well_formed: false`, and the scorers count it
as malformed instead of scoring it (several samples: the same fields as lists, `responses`,
`plans`, `raw_responses`). Bad requests (empty or over-long prompts, malformed messages, invalid
sampling values) and input lines that are not records (not UTF-8, not JSON, not an object) are
reported with file:line, written to `<output>.errors.jsonl` and retried on re-run; the other requests
are unaffected, and the run exits 1 with their count. Ids must be unique: a repeated
id is refused before anything runs. An output named `*.gz` is written and resumed compressed.
The settings applied (preset, sampling values and which flags overrode them, ids, template, model) go to
`<output>.meta.json`; resuming an output made with other settings is refused.
An output in a bucket (gs://BUCKET/out.jsonl, `pip install "jaxwrite[gcs]"`) is written in a local staging
folder and copied there every 50 responses or 60 s, at the end and when the run fails; a re-run on any
machine first pulls what the bucket holds and skips those ids.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from jaxwrite.common import InputError, InputLines, RecordJob, read_input


@dataclasses.dataclass(frozen=True)
class Preset:
    """An official evaluator's generation settings, and how its prompt file is read as shipped."""
    sampling: dict
    source: str
    number_lines: bool = False   # the file has no ids: each record's 1-based number is its `index`


PRESETS = {
    "writingbench": Preset(dict(temperature=0.7, top_p=0.8, top_k=20, max_new_tokens=16000),
                           "WritingBench generation settings (benchmark_all.jsonl: index, query)"),
    "longbench-write": Preset(dict(temperature=0.5, top_p=1.0, top_k=0, max_new_tokens=32768),
                              "LongWriter evaluation/pred.py (prompt files without ids: index = line number)",
                              number_lines=True),
}
_DEFAULTS = dict(temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=1024)


def register(subparsers) -> None:
    p = subparsers.add_parser("generate", help="sample responses for a jsonl of prompts (resumable)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, metavar="SPEC",
                   help="the model, run in process: a Hugging Face dir or jaxwrite checkpoint, a .gguf file, or a "
                        "hub id (ORG/NAME[@REV], from the hub cache or downloaded)")
    p.add_argument("--input", required=True, help="prompts jsonl")
    p.add_argument("--output", required=True, help="responses jsonl (appended; resumed by id); gs:// works")
    p.add_argument("--preset", choices=sorted(PRESETS),
                   help="an official evaluator's generation settings and prompt file as shipped "
                        "(longbench-write numbers id-less lines as `index`); flags override")
    p.add_argument("--temperature", type=float)
    p.add_argument("--top-p", type=float)
    p.add_argument("--top-k", type=int, help="0 = off")
    p.add_argument("--max-new-tokens", type=int)
    p.add_argument("--seed", type=int, default=0, help="base seed; the prompt on input line L uses seed + L")
    p.add_argument("--num-samples", type=int, default=1, help="samples per prompt (one shared prefill)")
    p.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    p.add_argument("--think-answer", choices=("en", "zh"),
                   help="wrap each query in the <think>/<answer> template and stop at </answer>")
    p.add_argument("--no-chat-template", action="store_true", help="send `prompt` text as is")
    p.add_argument("--id-field", help="id field of input lines (default: index, else id)")
    p.add_argument("--max-batch", type=int, default=32)
    p.add_argument("--mesh", help="data,fsdp,tensor sizes, e.g. 1,1,-1 (default: one device)")
    p.add_argument("--dtype", choices=("float32", "bfloat16"))
    p.set_defaults(func=run)


def sampling_settings(args) -> dict:
    """Preset values overridden by explicitly given flags."""
    preset = PRESETS[args.preset].sampling if args.preset else {}
    settings = dict(_DEFAULTS, **preset)
    for key in settings:
        value = getattr(args, key)
        if value is not None:
            settings[key] = value
    return settings


def _with_ids(lines: InputLines, args) -> tuple[list[tuple[int, dict]], str, str]:
    """(records, id field, how ids were found): every good record carries its id, or InputError saying what to add."""
    records = lines.records
    first = records[0][1] if records else {}
    id_field = args.id_field or ("index" if "index" in first else "id")
    numbered = (args.preset and PRESETS[args.preset].number_lines and not args.id_field
                and not any("index" in rec or "id" in rec for _, rec in records))
    if numbered:   # e.g. LongBench-Write: no ids upstream, the scorer keys on the 1-based line number
        # A bad line keeps its number, so the records after it keep theirs.
        numbered_records = [(line, {**rec, "index": n}) for n, (line, rec, bad) in enumerate(lines.entries, 1)
                            if bad is None]
        return numbered_records, "index", "1-based line number of the input (the file has no ids), written as index"
    for line, rec in records:
        if id_field not in rec:
            hint = (f"add \"{id_field}\" to every line" if args.id_field else
                    "add an \"index\" or \"id\" to every line (--id-field names another field)")
            number = [name for name, p in PRESETS.items() if p.number_lines]
            raise InputError(f"missing id; {hint}, or for a benchmark file without ids use --preset "
                             f"{' / '.join(number)}, which numbers lines 1, 2, ... as index",
                             path=args.input, line=line, field=id_field)
    return records, id_field, f"the input's {id_field!r} field"


def _metadata(args, settings: dict, ids: str) -> dict:
    """What `<output>.meta.json` records: every setting that shaped the responses, and its origin."""
    preset = PRESETS[args.preset] if args.preset else None
    from jaxwrite.common.hub import hub_id
    model = args.model if hub_id(args.model) else os.path.abspath(args.model)   # a hub id is recorded as given
    return {"model": model, "input": os.path.abspath(args.input),
            "preset": args.preset, "preset_source": preset.source if preset else None,
            "sampling": settings,
            "overridden_by_flags": sorted(k for k in settings if getattr(args, k) is not None),
            "seed": args.seed, "seed_rule": "seed + the prompt's input line number",
            "num_samples": args.num_samples,
            "stop": list(args.stop), "think_answer": args.think_answer,
            "chat_template": not args.no_chat_template or args.think_answer is not None,
            "dtype": args.dtype, "ids": ids}


def _messages(rec: dict, args, path: str, line: int) -> list[dict] | str:
    from jaxwrite.text import think_answer_messages
    if "messages" in rec:
        msgs = rec["messages"]
        if not isinstance(msgs, list) or not all(isinstance(m, dict) and isinstance(m.get("role"), str)
                                                 and isinstance(m.get("content"), str) for m in msgs):
            raise InputError("expected a list of {role, content} objects with string values", path=path,
                             line=line, field="messages")
        return msgs
    field = "query" if "query" in rec else "prompt"
    text = rec.get(field)
    if not isinstance(text, str):
        raise InputError("expected a string (or give 'messages')", path=path, line=line, field=field)
    if not text.strip():
        raise InputError("expected a non-empty prompt", path=path, line=line, field=field)
    if args.think_answer:
        return think_answer_messages(text, args.think_answer)
    if args.no_chat_template:
        return text
    return [{"role": "user", "content": text}]


def run(args) -> int:
    from jaxwrite.chat.resolve import local_model_spec
    from jaxwrite.common.remote import StagedOutput
    from jaxwrite.parallel import process_shard

    args.model_spec = local_model_spec(args.model, "--model")   # a bad --model is refused before any input is read
    lines = read_input(args.input)   # lines that are not records are skipped and counted (pending)
    records, id_field, id_rule = _with_ids(lines, args)
    settings = sampling_settings(args)
    # Several processes (a pod slice, a SLURM job): each generates its share into its own part file on its
    # own devices, and the first merges the parts at the end (RecordJob). One process: the whole input.
    shard = process_shard()
    # A bucket output is written in a local staging folder, pulled first and pushed as it grows.
    with StagedOutput(args.output, tag=shard.tag) as out:
        return _generate(args, lines, records, id_field, settings, id_rule, shard, out)


def _generate(args, lines: InputLines, records, id_field: str, settings: dict, id_rule: str, shard, out) -> int:
    import jax

    from jaxwrite.infer import Engine, GenerationRequest, SamplingParams, load_for_inference
    from jaxwrite.parallel import make_mesh
    from jaxwrite.common.job_meta import write_or_check_meta
    from jaxwrite.text import STOP_STRING, think_answer_fields

    # The job first: its lock keeps a second run on this output from touching anything, the settings included.
    job = RecordJob(out.path, id_field, desc="generate", unit="prompt", failures=out.path + ".errors.jsonl",
                    shard=shard, mirror=out.mirror)
    # One output holds one run's settings: resuming it with others is refused before anything runs (by
    # the first process, which writes them; the others start once it has).
    if shard.is_lead:
        write_or_check_meta(out.path, _metadata(args, settings, id_rule), ("model", "sampling", "seed",
                            "num_samples", "stop", "think_answer", "chat_template", "ids"))
        if out.mirror is not None:
            out.mirror.push(only=[out.path + ".meta.json"])
    if shard.barrier is not None:
        shard.barrier()
    todo = job.pending(records, id_of=lambda r: r[1][id_field], source=args.input, line_of=lambda r: r[0],
                       unreadable=lines.bad)
    share = f" (process {shard.index} of {shard.count})" if shard.count > 1 else ""
    print(f"generate{share}: {job.total} prompts, {job.resumed} already in {args.output}, "
          f"{len(todo)} to run", file=sys.stderr)
    if not todo:
        return 1 if job.close() else 0   # close: the other processes may still wait at the merge barrier
    # This process's own devices only: the processes generate different prompts, never one program.
    devices = jax.local_devices() if shard.count > 1 else None
    mesh = make_mesh(_mesh_shape(args.mesh), devices=devices) if args.mesh else None
    model, tokenizer = load_for_inference(args.model_spec.local_path(), mesh=mesh, dtype=args.dtype)
    engine = Engine(model, tokenizer, mesh=mesh, max_batch=args.max_batch)
    stops = tuple(args.stop) + ((STOP_STRING,) if args.think_answer else ())

    def request(item):
        line, rec = item
        convo = _messages(rec, args, args.input, line)
        try:
            ids = tokenizer.encode(convo) if isinstance(convo, str) else tokenizer.encode_chat(convo)
        except ValueError as err:   # e.g. a conversation the chat template cannot render
            raise InputError(str(err), path=args.input, line=line) from None
        params = SamplingParams(temperature=settings["temperature"], top_p=settings["top_p"],
                                top_k=settings["top_k"], max_new_tokens=settings["max_new_tokens"],
                                seed=args.seed + line, n=args.num_samples, stop=stops)
        return GenerationRequest(ids, params)

    prepared = list(job.each(todo, request))   # bad lines are reported and skipped here
    origin = [item for item, _ in prepared]
    pending: dict[int, list] = {}
    for c in engine.stream([req for _, req in prepared]):
        line, rec = origin[c.request_index]
        if c.error is not None:   # a bad request (over-long prompt, invalid sampling values)
            job.skip(origin[c.request_index], c.error)
            continue
        samples = pending.setdefault(c.request_index, [])
        samples.append(c)
        if len(samples) < args.num_samples:
            continue
        samples.sort(key=lambda s: s.sample_index)
        out = {id_field: rec[id_field]}
        if args.num_samples == 1:
            out.update(response=c.text, finish_reason=c.finish_reason, prompt_tokens=c.prompt_tokens,
                       completion_tokens=len(c.token_ids))
        else:
            out.update(responses=[s.text for s in samples], finish_reasons=[s.finish_reason for s in samples],
                       prompt_tokens=c.prompt_tokens, completion_tokens=[len(s.token_ids) for s in samples])
        if args.think_answer:
            out.update(think_answer_fields(samples, single=args.num_samples == 1))
        job.write(out)
        del pending[c.request_index]
    return 1 if job.close() else 0


def _mesh_shape(spec: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in spec.split(","))
    except ValueError:
        raise InputError(f"--mesh: expected comma-separated integer sizes (data,fsdp,tensor), found {spec!r}") \
            from None
