"""The README's everyday table, end to end on one tiny model (issue 18).

Every command runs as a user types it: the model under test and the judge are a tiny random model,
either served by `jaxwrite serve` (a real subprocess on 127.0.0.1) or run in process
(`--judge DIR`), in each judge mode the command offers. A command must exit 0, or with its
documented outcome (1: some records failed and were counted; 2: one line naming what to fix), never with
a traceback; every report or summary it writes names its judge and the judge's mode.

A random model never stops on its own, so the judges' sampling budgets are cut to a few tokens here
(their official values are asserted by the benchmarks' own tests); verdicts are then mostly
unparseable, which is exactly the failure accounting these commands must report.
"""
import dataclasses
import json
import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from flax import nnx

from jaxwrite.cli import main
from jaxwrite.models import Transformer, get_preset, save_hf
from test_infer_support import tokenizer, tokenizer_dir

pytestmark = pytest.mark.filterwarnings("ignore")
SERVED = "tiny"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> pathlib.Path:
    # A context long enough for WritingBench's critic prompt on this small-vocabulary tokenizer.
    path = tmp_path_factory.mktemp("everyday") / "tiny-hf"
    model = Transformer(get_preset("tiny", vocab_size=tokenizer().vocab_size, max_seq_len=4096), nnx.Rngs(0))
    save_hf(model, str(path), tokenizer_dir=tokenizer_dir())
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(model_dir, tmp_path_factory):
    """`jaxwrite serve` in its own process; yields the base URL."""
    port = _free_port()
    log = open(tmp_path_factory.mktemp("serve") / "serve.log", "w")
    cmd = [sys.executable, "-c", "import sys; from jaxwrite.cli import main; sys.exit(main())", "serve",
           "--model", str(model_dir), "--port", str(port), "--model-name", SERVED, "--max-batch", "8"]
    env = dict(os.environ, XLA_FLAGS="", JAX_PLATFORMS="cpu")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=5) as resp:
                    if json.loads(resp.read())["data"][0]["id"] == SERVED:
                        break
            except OSError as err:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"jaxwrite serve did not start: {pathlib.Path(log.name).read_text()}") from err
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.fixture(autouse=True)
def short_judges(monkeypatch):
    from jaxwrite.evals import longbench_write, longbench_write_run, writingbench_critic, writingbench_score
    critic = dataclasses.replace(writingbench_critic.CRITIC_SAMPLING, max_new_tokens=12)
    monkeypatch.setattr(writingbench_critic, "CRITIC_SAMPLING", critic)
    monkeypatch.setattr(writingbench_score, "CRITIC_SAMPLING", critic)
    quality = dataclasses.replace(longbench_write.JUDGE_SAMPLING, max_new_tokens=12)
    monkeypatch.setattr(longbench_write, "JUDGE_SAMPLING", quality)
    monkeypatch.setattr(longbench_write_run, "JUDGE_SAMPLING", quality)


def _run(argv, capsys, allowed=(0,)) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code in allowed, f"{argv[:3]} exited {code}: {err[-2000:]}"
    assert "Traceback" not in err, err
    if code == 2:   # the documented bad-input exit: one line saying what to fix
        assert len([line for line in err.splitlines() if "error:" in line]) == 1, err
    return code, out, err


def _judges(served, model_dir):
    """(name, judge flags, mode) for each judge transport and mode."""
    return [("http", ["--judge", served, "--judge-model", SERVED], "generate"),
            ("local", ["--judge", model_dir, "--judge-concurrency", "4"], "generate"),
            ("logit", ["--judge", model_dir, "--judge-mode", "score_logit"], "score_logit")]


def _names_judge(directory: pathlib.Path, mode: str) -> None:
    """Every report and summary under `directory` names a judge and this mode."""
    files = [p for p in directory.rglob("*") if p.name in ("summary.json", "report.md")]
    assert files, f"no report written in {directory}"
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert mode in text and "judge" in text.lower(), f"{path} does not name its judge and mode"
        if path.suffix == ".json":
            judging = json.loads(text)["judging"]
            assert judging["mode"] == mode and judging["judge"]


def _refuses_score_logit(code: int, err: str) -> None:
    """The one-line refusal of a judge mode the command cannot use."""
    [line] = err.strip().splitlines()
    assert code == 2 and "--judge-mode score_logit: not usable here" in line, err
    assert line.endswith("modes that work: generate"), line


def _jsonl(path: pathlib.Path, rows) -> pathlib.Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_model_commands(model_dir, tmp_path, capsys, data_dir):
    _, out, _ = _run(["model", "info", "tiny", "--json"], capsys)
    assert json.loads(out.splitlines()[0])["params"] > 0
    _run(["model", "info", model_dir], capsys)
    _run(["convert", model_dir, tmp_path / "converted"], capsys)
    _run(["model", "info", tmp_path / "converted"], capsys)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text((data_dir / "corpus_en" / "pg11.txt").read_text(encoding="utf-8")[:200_000], encoding="utf-8")
    _run(["tokenizer", "train", "--input", corpus, "--output", tmp_path / "tok", "--vocab-size", "512"], capsys)
    assert (tmp_path / "tok").is_dir()
    _run(["tokenizer", "train", "--input", corpus, "--output", tmp_path / "tok2", "--vocab-size", "0"], capsys,
         allowed=(2,))
    _run(["data", "clean", "--input", data_dir / "corpus_en" / "pg11.txt", "--output", tmp_path / "clean.jsonl"],
         capsys)


def test_train_any_objective(tmp_path, capsys, data_dir):
    _run(["train", "--config", "cpt_tiny", "--workdir", tmp_path / "cpt", "--config.num_steps=2",
          f"--config.data_dir={data_dir}", "--config.progress_bar=False"], capsys)
    assert (tmp_path / "cpt" / "metrics.jsonl").exists()
    _run(["train", "--config", "cpt_tiny", "--workdir", tmp_path / "bad", "--config.nope=1"], capsys, allowed=(2,))


def test_generate_then_every_scorer(model_dir, served, tmp_path, capsys, data_dir):
    # generate with the benchmark files as shipped
    wb = _jsonl(tmp_path / "wb.jsonl", [json.loads(line) for line in
                                        (data_dir / "writingbench" / "benchmark_all.jsonl").open(encoding="utf-8")
                                        if json.loads(line)["index"] in (52, 202)])
    lbw = tmp_path / "lbw.jsonl"
    lbw.write_text("".join((data_dir / "longbench_write" / "longbench_write_en.jsonl")
                           .read_text(encoding="utf-8").splitlines(keepends=True)[:2]), encoding="utf-8")
    common = ["--model", model_dir, "--max-new-tokens", "12", "--max-batch", "4"]
    _run(["generate", *common, "--input", wb, "--output", tmp_path / "wb_out.jsonl", "--preset", "writingbench"],
         capsys)
    _run(["generate", *common, "--input", lbw, "--output", tmp_path / "lbw_out.jsonl",
          "--preset", "longbench-write"], capsys)
    assert [json.loads(r)["index"] for r in (tmp_path / "lbw_out.jsonl").read_text().splitlines()] == [1, 2]

    for name, judge, mode in _judges(served, model_dir):
        scores = tmp_path / f"scores_{name}.jsonl"
        _run(["eval", "writingbench", "score", "--responses", tmp_path / "wb_out.jsonl", *judge,
              "--output", scores, "--data-dir", data_dir, "--indices", "52", "202", "--seeds", "0",
              "--attempts", "2",   # a random judge's verdicts never parse: 2 tries show the accounting
              "--report-dir", tmp_path / f"wb_report_{name}"], capsys, allowed=(0, 1))
        _names_judge(tmp_path / f"wb_report_{name}", mode)
        # succeeds even when every query failed (count 0): its judging block says who judged and why
        _run(["eval", "writingbench", "aggregate", "--scores", scores, "--data-dir", data_dir,
              "--output", tmp_path / f"agg_{name}.json"], capsys)
        judging = json.loads((tmp_path / f"agg_{name}.json").read_text())["judging"]
        assert judging["mode"] == mode and judging["judge"]
        lbw_dir = tmp_path / f"lbw_{name}"
        code, _, err = _run(["eval", "longbench-write", "score", "--responses", tmp_path / "lbw_out.jsonl",
                             "--benchmark", "longbench_write_en", "--data-dir", data_dir, *judge,
                             "--output", lbw_dir], capsys, allowed=(0, 1, 2))
        if mode == "score_logit":   # LongBench-Write's 1-5 dimension verdicts cannot come from one score
            _refuses_score_logit(code, err)
        else:
            _names_judge(lbw_dir, mode)
    # no judge: S_l only, and the report says so
    _run(["eval", "longbench-write", "score", "--responses", tmp_path / "lbw_out.jsonl", "--benchmark",
          "longbench_write_en", "--data-dir", data_dir, "--output", tmp_path / "lbw_none"], capsys)
    assert "no judge" in (tmp_path / "lbw_none" / "report.md").read_text()


def test_pairwise_and_multi_turn_evals(model_dir, served, tmp_path, capsys, data_dir):
    prompts = _jsonl(tmp_path / "prompts.jsonl", [{"id": i, "prompt": f"write about the river {i}"}
                                                  for i in range(2)])
    for seed in (1, 2):
        _run(["generate", "--model", model_dir, "--input", prompts, "--output", tmp_path / f"m{seed}.jsonl",
              "--max-new-tokens", "8", "--seed", seed, "--temperature", "1.0"], capsys)
    for name, judge, mode in _judges(served, model_dir):
        code, _, err = _run(["eval", "arena", "--responses", tmp_path / "m1.jsonl", tmp_path / "m2.jsonl",
                             "--prompts", prompts, *judge, "--judge-max-tokens", "6", "--bootstrap", "5",
                             "--output", tmp_path / f"arena_{name}"], capsys, allowed=(0, 1, 2))
        model = (["--model", served, "--model-name", SERVED] if name == "http"
                 else ["--model", model_dir])
        if mode == "score_logit":   # no pairwise or checklist verdict comes from one 1-10 score
            _refuses_score_logit(code, err)
            code, _, err = _run(["eval", "agreement", *judge, "--data-dir", data_dir, "--output",
                                 tmp_path / f"agree_{name}"], capsys, allowed=(2,))
            _refuses_score_logit(code, err)
            code, _, err = _run(["eval", "refinebench", *model, *judge, "--data-dir", data_dir, "--output",
                                 tmp_path / f"refine_{name}"], capsys, allowed=(2,))
            _refuses_score_logit(code, err)
            assert not any((tmp_path / f"{kind}_{name}").exists() for kind in ("arena", "agree", "refine"))
            continue
        _names_judge(tmp_path / f"arena_{name}", mode)
        json.loads((tmp_path / f"arena_{name}" / "summary.json").read_text())   # valid JSON, never NaN
        code, _, err = _run(["eval", "agreement", *judge, "--data-dir", data_dir, "--max-pairs", "2",
                             "--single-order", "--judge-max-tokens", "6", "--bootstrap", "5",
                             "--output", tmp_path / f"agree_{name}"], capsys, allowed=(0, 1))
        _names_judge(tmp_path / f"agree_{name}", mode)
        _run(["eval", "refinebench", *model, *judge, "--mode", "guided", "--turns", "1", "--limit", "1",
              "--model-max-tokens", "8", "--judge-max-tokens", "8", "--data-dir", data_dir,
              "--output", tmp_path / f"refine_{name}"], capsys, allowed=(0, 1))
        _names_judge(tmp_path / f"refine_{name}", mode)


def test_data_and_prep_with_a_tiny_generator(model_dir, served, tmp_path, capsys, data_dir):
    queries = _jsonl(tmp_path / "queries.jsonl", [{"id": f"q{i}", "query": f"Write a letter to a friend {i}.",
                                                   "domain1": "Literature", "domain2": "Letters"}
                                                  for i in range(2)])
    for name, flags in (("http", ["--generator", served, "--generator-model", SERVED]),
                        ("local", ["--generator", model_dir])):
        # a random generator writes no valid criteria: each query is counted as failed, exit 1
        _run(["prep", "criteria", "--queries", queries, "--output", tmp_path / f"criteria_{name}.jsonl",
              *flags, "--no-progress", "--max-tokens", "16"], capsys, allowed=(0, 1))
    # `data criteria` is the same step under `data`
    _run(["data", "criteria", "--queries", queries, "--output", tmp_path / "criteria_data.jsonl",
          "--generator", served, "--generator-model", SERVED, "--no-progress", "--max-tokens", "16",
          "--attempts", "1"], capsys, allowed=(0, 1))
    # long-form prompts: a random labeller gives no valid label, so every prompt is counted as failed
    _run(["prep", "long-form", "--prompts", _jsonl(tmp_path / "lf.jsonl", [{"id": "p0", "prompt": "Write a story."}]),
          "--labels", tmp_path / "lf_labels.jsonl", "--output", tmp_path / "lf_rl.jsonl", "--labeller", model_dir,
          "--max-tokens", "8", "--attempts", "1", "--no-progress"], capsys, allowed=(0, 1))
    # download: the offline dry run lists what it would fetch (no network here) and writes nothing
    _, out, _ = _run(["data", "download", "--dry-run", "--only", "writingbench,longbench_write",
                      "--output", tmp_path / "downloaded"], capsys)
    assert "benchmark_all.jsonl" in out and "longbench_write" in out and not (tmp_path / "downloaded").exists()
    _run(["data", "pairs", "--data-dir", data_dir, "--output", tmp_path / "pairs"], capsys)
    assert json.loads((tmp_path / "pairs" / "stats.json").read_text())["pairs"] > 0
    _run(["data", "degraded-pairs", "--data-dir", data_dir, "--output", tmp_path / "degraded",
          "--passages-per-book", "2"], capsys)
    assert (tmp_path / "degraded" / "train.jsonl").stat().st_size > 0

    # Model-labelled critic data, chained as the README table says: criteria (here WritingBench's own,
    # which the prep steps read as shipped) -> teacher responses -> critic verdicts -> filter ->
    # critic-data -> critic-sft -> the critic SFT recipe trains on the result.
    criteria = _jsonl(tmp_path / "criteria.jsonl",
                      [json.loads(line) for line in (data_dir / "writingbench" / "benchmark_all.jsonl")
                       .open(encoding="utf-8") if json.loads(line)["index"] in (52, 202)])
    _run(["prep", "responses", "--criteria", criteria, "--output", tmp_path / "responses.jsonl", "--teacher",
          served, "--teacher-model", SERVED, "--num-samples", "2", "--max-tokens", "8", "--no-progress",
          "--data-dir", data_dir, "--allow-overlap"], capsys)
    code, _, _ = _run(["prep", "critic-score", "--criteria", criteria, "--responses", tmp_path / "responses.jsonl",
                       "--output", tmp_path / "critic_scores.jsonl", "--critic", model_dir, "--constrain-json",
                       "--critic-concurrency", "32", "--no-progress"], capsys, allowed=(0, 1))
    _run(["prep", "filter", "--criteria", criteria, "--responses", tmp_path / "responses.jsonl", "--scores",
          tmp_path / "critic_scores.jsonl", "--output-dir", tmp_path / "filtered", "--on-small", "keep"],
         capsys, allowed=(0, 1, 2))
    _run(["data", "critic-data", "--critic-scores", tmp_path / "critic_scores.jsonl", "--criteria", criteria,
          "--responses", tmp_path / "responses.jsonl", "--output-dir", tmp_path / "critic_data",
          "--data-dir", data_dir, "--allow-overlap", "--heldout-fraction", "0.5"], capsys, allowed=(0, 2))
    verdicts = _jsonl(tmp_path / "verdicts.jsonl", [
        {"query": f"Write a letter to a friend {i}.", "response": "Dear friend, hello.",
         "criterion": {"name": "Tone", "criteria_description": "warm"}, "score": 3 + i, "reason": "ok"}
        for i in range(4)])
    _run(["data", "critic-data", "--verdicts", verdicts, "--output-dir", tmp_path / "critic_data_v",
          "--data-dir", data_dir, "--heldout-fraction", "0.5"], capsys)
    _run(["data", "critic-sft", "--input", verdicts, "--output", tmp_path / "critic_sft.jsonl",
          "--data-dir", data_dir], capsys)
    # the recipe reads either form: critic-data's verdicts and critic-sft's rendered conversations
    for train_path in (tmp_path / "critic_data_v" / "train.jsonl", tmp_path / "critic_sft.jsonl"):
        _run(["train", "--config", "critic_sft_tiny", "--workdir", tmp_path / f"critic_{train_path.stem}",
              f"--config.data.train_path={train_path}", "--config.num_steps=1", "--config.progress_bar=False",
              f"--config.data_dir={data_dir}"], capsys)
