"""Commands read each other's outputs and the benchmark files as shipped, and bad input ends in one line
naming the flag to use: generate presets on the real LongBench-Write / WritingBench files, `data
critic-sft` output training the critic recipe (with an eval file smaller than one batch), `model info`
on a trainer workdir and step dir, and the advice of tokenizer training and the contamination guard."""
import json

import pytest

from jaxwrite.cli import main
from jaxwrite.models import save_hf
from test_infer_support import model, tokenizer_dir as infer_tokenizer_dir
from train_fixtures import train_tokenizer, write_corpus


def _lines(path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _write(path, records):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("hf") / "tiny"
    save_hf(model(), str(path), tokenizer_dir=infer_tokenizer_dir())
    return path


# --- generate: benchmark files as shipped -------------------------------------------------------------
def test_longbench_write_file_generates_and_scores(hf_dir, data_dir, tmp_path, capsys):
    shipped = (data_dir / "longbench_write" / "longbench_write_en.jsonl").read_text(encoding="utf-8")
    prompts = tmp_path / "lbw.jsonl"
    prompts.write_text("".join(shipped.splitlines(keepends=True)[:3]), encoding="utf-8")   # no ids, as shipped
    out = tmp_path / "responses.jsonl"
    args = ["generate", "--model", str(hf_dir), "--input", str(prompts), "--output", str(out),
            "--max-new-tokens", "4"]
    assert main(args) == 2   # no preset: the file has no ids, and the error says what to do
    err = capsys.readouterr().err
    assert f"{prompts}:1 field 'id': missing id" in err and "--preset longbench-write" in err
    assert main(args + ["--preset", "longbench-write"]) == 0
    assert [r["index"] for r in _lines(out)] == [1, 2, 3]
    meta = json.loads((tmp_path / "responses.jsonl.meta.json").read_text())
    assert meta["preset"] == "longbench-write" and meta["overridden_by_flags"] == ["max_new_tokens"]
    assert meta["sampling"] == {"temperature": 0.5, "top_p": 1.0, "top_k": 0, "max_new_tokens": 4}
    assert "line number" in meta["ids"]
    # The scorer reads the output as written (length score only, no judge).
    report = tmp_path / "report"
    assert main(["eval", "longbench-write", "score", "--responses", str(out), "--output", str(report),
                 "--benchmark", "longbench_write_en", "--data-dir", str(data_dir), "--answer-extraction", "none"]) == 0
    scored = json.loads((report / "summary.json").read_text())
    assert scored["answered"] == 3 and scored["missing"] == 57


def test_resume_with_other_settings_is_refused(hf_dir, tmp_path, capsys):
    prompts = _write(tmp_path / "p.jsonl", [{"id": "a", "prompt": "river"}])
    out = tmp_path / "o.jsonl"
    args = ["generate", "--model", str(hf_dir), "--input", str(prompts), "--output", str(out), "--max-new-tokens", "3"]
    assert main(args) == 0 and main(args) == 0   # same settings: resumes (nothing left to do)
    assert main(args + ["--temperature", "0.2"]) == 2
    assert "sampling differ" in capsys.readouterr().err and len(_lines(out)) == 1


def test_writingbench_file_generates_with_its_indices(hf_dir, data_dir, tmp_path):
    short = []
    with open(data_dir / "writingbench" / "benchmark_all.jsonl", encoding="utf-8") as f:
        for line in f:
            if len(json.loads(line)["query"]) < 120:
                short.append(line)
            if len(short) == 2:
                break
    prompts = tmp_path / "wb.jsonl"
    prompts.write_text("".join(short), encoding="utf-8")
    out = tmp_path / "wb_out.jsonl"
    assert main(["generate", "--model", str(hf_dir), "--input", str(prompts), "--output", str(out),
                 "--preset", "writingbench", "--max-new-tokens", "3"]) == 0
    assert [r["index"] for r in _lines(out)] == [json.loads(line)["index"] for line in short]
    meta = json.loads((tmp_path / "wb_out.jsonl.meta.json").read_text())
    assert meta["sampling"]["top_k"] == 20 and meta["ids"] == "the input's 'index' field"


# --- critic SFT: `data critic-sft` output trains the recipe ------------------------------------------
@pytest.fixture(scope="module")
def train_tokenizer_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("tok")
    return train_tokenizer(write_corpus(root / "data", books=2, paragraphs=60), root / "tok")


def _verdicts(queries):
    criterion = {"name": "Clarity", "criteria_description": "Is it clear?", "1-2": "no", "3-4": "a bit",
                 "5-6": "fair", "7-8": "good", "9-10": "very"}
    return [{"query": q, "response": f"The captain wrote letter {i}.", "criterion": criterion,
             "score": 1 + i % 10, "reason": "short and plain"} for i, q in enumerate(queries)]


@pytest.fixture()
def small_writingbench(tmp_path):
    """A data root whose writingbench/ holds a two-query benchmark for the guard (the critic prompts are the
    official ones bundled with jaxwrite)."""
    benchmark = tmp_path / "data" / "writingbench"
    benchmark.mkdir(parents=True)
    _write(benchmark / "benchmark_all.jsonl",
           [{"index": i, "query": f"Write a detailed market report on bicycles in region {i} with five year "
                                  "forecasts pricing channels competitors and regulation tables"} for i in (1, 2)])
    return tmp_path / "data"


def test_critic_sft_output_trains_and_a_small_eval_file_is_evaluated(small_writingbench, train_tokenizer_dir,
                                                                      tmp_path, capsys):
    verdicts = _write(tmp_path / "verdicts.jsonl", _verdicts([f"Write a note about house {i}." for i in range(6)]))
    rendered = tmp_path / "critic_sft.jsonl"
    assert main(["data", "critic-sft", "--input", str(verdicts), "--output", str(rendered),
                 "--data-dir", str(small_writingbench)]) == 0
    assert [m["role"] for m in _lines(rendered)[0]["messages"]] == ["system", "user", "assistant"]
    # 6 eval records, one row each (no packing), batch 8: less than one batch, evaluated all the same.
    eval_file = _write(tmp_path / "eval.jsonl", _verdicts([f"Describe the river, part {i}." for i in range(6)]))
    run = tmp_path / "run"
    overrides = {"data_dir": small_writingbench, "tokenizer.path": train_tokenizer_dir, "data.train_path": rendered,
                 "data.eval_path": eval_file, "data.seq_len": 512, "data.pack": False, "data.batch_size": 8,
                 "num_steps": 2, "eval_every": 2, "checkpoint_every": 2, "log_every": 1, "model.num_layers": 1,
                 "progress_bar": False, "peak_flops_per_device": 1e12}
    assert main(["train", "--config", "critic_sft_tiny", "--workdir", str(run)]
                + [f"--config.{k}={v}" for k, v in overrides.items()]) == 0
    records = [json.loads(line) for line in open(run / "metrics.jsonl")]
    assert [r["step"] for r in records if "loss" in r] == [1, 2]
    evals = [r for r in records if "eval/loss" in r]
    assert [r["step"] for r in evals] == [0, 2] and all(r["eval/loss_tokens"] > 0 for r in evals)
    info = json.loads((run / "data_info.json").read_text())
    assert info["format"] == "messages" and info["kept"] == 6 and info["eval"]["format"] == "verdicts"
    # `model info` reads the trainer workdir and a step dir, as `convert` does.
    capsys.readouterr()
    assert main(["model", "info", str(run), "--json"]) == 0
    whole = json.loads(capsys.readouterr().out)
    steps = sorted(p for p in (run / "checkpoints").iterdir() if p.name.isdigit())
    assert main(["model", "info", str(steps[-1]), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["params"] == whole["params"] > 0


def test_rendered_critic_records_are_guarded_and_other_files_refused(data_dir, tmp_path, capsys):
    bench = json.loads(open(data_dir / "writingbench" / "benchmark_all.jsonl", encoding="utf-8").readline())
    records = _verdicts(["A haiku about rain on a tin roof at night, please.", bench["query"]])
    rendered = tmp_path / "rendered.jsonl"
    assert main(["data", "critic-sft", "--input", str(_write(tmp_path / "v.jsonl", records)), "--output",
                 str(rendered), "--data-dir", str(data_dir), "--allow-overlap"]) == 0
    # Fed back in, the rendered file is guarded again: the query is read back out of the user turn.
    again = ["data", "critic-sft", "--input", str(rendered), "--output", str(tmp_path / "again.jsonl"),
             "--data-dir", str(data_dir)]
    assert main(again) == 2
    err = capsys.readouterr().err
    assert "rendered.jsonl:2" in err and "--on-overlap drop" in err and "--config.data.on_overlap=drop" in err
    assert main(again + ["--on-overlap", "drop"]) == 0 and len(_lines(tmp_path / "again.jsonl")) == 1
    # A user turn in another template: the guard cannot find the query, and says so.
    _write(rendered, [{"messages": [{"role": "user", "content": "rate this"}, {"role": "assistant", "content": "{}"}]}])
    assert main(again) == 2
    assert "does not follow the critic template" in capsys.readouterr().err
    # Neither format: both are named.
    _write(rendered, [{"prompt": "x", "completion": "y"}])
    assert main(again) == 2
    err = capsys.readouterr().err
    assert "rendered.jsonl:1" in err and "{messages:" in err and "{query, response, criterion, score, reason}" in err


# --- one-line advice naming flags the command takes ---------------------------------------------------
def test_tokenizer_errors_name_its_flags(tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("hello world\nthe cat sat\n", encoding="utf-8")
    base = ["tokenizer", "train", "--input", str(text), "--output", str(tmp_path / "tok")]
    assert main(base + ["--vocab-size", "20"]) == 2
    err = capsys.readouterr().err
    assert "--vocab-size" in err and "--character-coverage" in err and "--character_coverage" not in err
    assert main(base + ["--vocab-size", "5000"]) == 2
    assert "set --vocab-size to at most" in capsys.readouterr().err
    assert main(base + ["--vocab-size", "300", "--character-coverage", "0.5"]) == 2
    assert "--character-coverage 0.5: expected 0.98 to 1.0" in capsys.readouterr().err


def test_model_info_unknown_preset_lists_presets(capsys):
    assert main(["model", "info", "tiny2"]) == 2
    err = capsys.readouterr().err
    assert "unknown preset 'tiny2'" in err and "tiny, small" in err and "not a directory" not in err


def test_model_info_on_an_empty_dir_names_both_config_files(tmp_path, capsys):
    assert main(["model", "info", str(tmp_path)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert str(tmp_path) in line and "Hugging Face config.json" in line and "model_config.json" in line


def test_a_negative_pair_cap_names_the_flag(tmp_path, capsys):
    # refused before the pool is read: no data dir is needed to see the error
    assert main(["data", "pairs", "--output", str(tmp_path / "p"), "--max-pairs-per-prompt", "-1"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "--max-pairs-per-prompt: expected 0 (keep all pairs) or a positive cap per prompt, got -1" in line
    assert not (tmp_path / "p").exists()
