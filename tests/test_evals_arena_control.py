"""Length- and style-controlled arena ratings (issue 27 §3): a judge that prefers the longer answer 90 % of the
time moves the raw Elo of two equally good models and leaves the length-controlled rating near equal; a
real quality gap survives the control; too few battles for a controlled fit is one line and the raw Elo
still reports."""
import json
import zlib

import numpy as np

from chat_server_support import scripted_chat_server
from jaxwrite.cli import main
from jaxwrite.evals.arena import PAIRWISE_SYSTEM, Battle, rate_arena
from jaxwrite.evals.arena_control import style_features
from jaxwrite.evals.arena_report import controlled_arena


def _texts(rng, n, median_words, marker):
    return [" ".join([marker] * max(1, int(rng.lognormal(np.log(median_words), 0.5)))) for _ in range(n)]


def _split(user):
    a = user.split("[Response A]\n")[1].split("\n[End of Response A]")[0]
    b = user.split("[Response B]\n")[1].split("\n[End of Response B]")[0]
    return a, b


def _length_biased(body):
    """Prefers the longer answer 90 % of the time (decided by a hash of the pair, so re-runs agree)."""
    assert body["messages"][0]["content"] == PAIRWISE_SYSTEM
    a, b = _split(body["messages"][1]["content"])
    longer = "A" if len(a.split()) > len(b.split()) else "B"
    coin = zlib.crc32(body["messages"][1]["content"].encode()) % 100
    return f"Comparing both. [[{longer if coin < 90 else 'AB'.replace(longer, '')}]]"


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_length_biased_judge_moves_raw_elo_not_the_length_controlled_rating(tmp_path, capsys):
    rng = np.random.default_rng(0)
    n = 150
    long, short = _texts(rng, n, 300, "long"), _texts(rng, n, 200, "short")
    prompts = _write(tmp_path / "p.jsonl", [{"id": i, "prompt": f"Write piece {i}."} for i in range(n)])
    a = _write(tmp_path / "verbose.jsonl", [{"id": i, "response": t} for i, t in enumerate(long)])
    b = _write(tmp_path / "terse.jsonl", [{"id": i, "response": t} for i, t in enumerate(short)])
    with scripted_chat_server(_length_biased) as url:
        assert main(["eval", "arena", "--responses", a, b, "--prompts", prompts, "--judge", url, "--judge-model", "j",
                     "--output", str(tmp_path / "out"), "--bootstrap", "200"]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    raw = summary["elo"]["verbose"] - summary["elo"]["terse"]
    lc = summary["length_controlled"]
    gap = lc["elo"]["verbose"] - lc["elo"]["terse"]
    assert raw > 80, raw                                    # the judge's taste for length moves raw Elo
    assert abs(gap) < 40, gap                               # ... and the length control takes it out
    assert lc["ci95"]["verbose"][0] < 1000 < lc["ci95"]["verbose"][1]
    assert summary["elo"]["verbose"] > summary["ci95"]["terse"][1]
    assert lc["coefficients"]["length"]["per_sd"] > 1.0     # what the judge pays for length
    assert summary["length_bias"]["longer_wins"] > 0.85
    assert summary["style_controlled"]["status"] == "ok"
    assert summary["style_controlled"]["features_left_out"] == ["headers", "list_items", "bold"]
    assert (tmp_path / "out" / "length_bias.png").exists()
    report = (tmp_path / "out" / "report.md").read_text()
    assert "Length-controlled Elo: which it would prefer if both answers were equally long" in report
    assert "![length_bias](length_bias.png)" in report


def test_a_real_quality_gap_survives_the_control():
    """Control: equally long answers, one model genuinely better (wins 75 %); the controlled rating keeps
    the gap the raw one shows."""
    rng = np.random.default_rng(1)
    answers = {"good": {}, "weak": {}}
    battles = []
    for i in range(200):
        pid = str(i)
        answers["good"][pid] = " ".join(["good"] * int(rng.lognormal(np.log(250), 0.5)))
        answers["weak"][pid] = " ".join(["weak"] * int(rng.lognormal(np.log(250), 0.5)))
        for first, second in (("good", "weak"), ("weak", "good")):
            winner = "good" if rng.random() < 0.75 else "weak"
            battles.append(Battle(pid, first, second, "A" if winner == first else "B"))
    raw = rate_arena(battles, bootstrap=0)
    control = controlled_arena(battles, answers, bootstrap=0)
    raw_gap = raw.elo["good"] - raw.elo["weak"]
    lc_gap = control.length.elo["good"] - control.length.elo["weak"]
    assert raw_gap > 120 and abs(lc_gap - raw_gap) < 30
    assert abs(control.length.coefficients["length"]["per_sd"]) < 0.3   # length tells this judge nothing


def test_too_few_battles_is_one_line_and_raw_elo_still_reports(tmp_path, capsys):
    prompts = _write(tmp_path / "p.jsonl", [{"id": i, "prompt": f"Write {i}."} for i in range(2)])
    a = _write(tmp_path / "a.jsonl", [{"id": i, "response": "long " * (10 + i)} for i in range(2)])
    b = _write(tmp_path / "b.jsonl", [{"id": i, "response": "short " * (3 + i)} for i in range(2)])
    with scripted_chat_server(_length_biased) as url:
        assert main(["eval", "arena", "--responses", a, b, "--prompts", prompts, "--judge", url, "--judge-model", "j",
                     "--output", str(tmp_path / "out"), "--bootstrap", "20"]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "controlled" in line]
    assert len(err) == 2 and all("not fitted: 4 valid battles, fewer than the" in line for line in err)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["status"] == "ok" and set(summary["elo"]) == {"a", "b"}
    assert summary["length_controlled"]["status"].startswith("not fitted")
    assert "not fitted" in (tmp_path / "out" / "report.md").read_text()


def test_style_features_count_markdown():
    text = ("# Title\n\nSome **bold** words and __more__.\n\n## Part\n- one\n- two\n* three\n1. first\n2) second\n"
            "#hashtag is not a header; ** spaced ** is not bold")
    assert style_features(text) == {"length": style_features(text)["length"], "headers": 2, "list_items": 5,
                                    "bold": 2}
