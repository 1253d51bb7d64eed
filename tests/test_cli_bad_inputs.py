"""Bad CLI inputs get one clear line, never a traceback (issue 17 item 3): each input of the issue's
list, run through the real `jaxwrite` entry point, ends with exit status 2 (1 where a bad record is
skipped while the rest run) and one `jaxwrite CMD: error: ...` line naming the file, line, field or flag."""
import gzip
import json
import re

import pytest

from jaxwrite.cli import main as cli_main
from test_infer_support import model, tokenizer_dir


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    from jaxwrite.models import save_hf
    out = tmp_path_factory.mktemp("hf") / "tiny"
    save_hf(model(), str(out), tokenizer_dir=tokenizer_dir())
    return out


def _error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert len(lines) == 1, err
    return lines[0]


def _generate(hf_dir, tmp_path, lines: bytes | str, *extra, output=None):
    src = tmp_path / "in.jsonl"
    src.write_bytes(lines if isinstance(lines, bytes) else lines.encode())
    return ["generate", "--model", str(hf_dir), "--input", str(src), "--output",
            str(output or tmp_path / "out.jsonl"), "--max-new-tokens", "2", *extra]


@pytest.mark.parametrize("name,lines,extra,expected", [
    ("id given as a list", '{"id": [1], "prompt": "a story"}\n', (),
     r"in\.jsonl:1 field 'id': expected a string or a number as the id, found list"),
    ("--mesh a,b", '{"id": 1, "prompt": "a story"}\n', ("--mesh", "a,b"),
     r"--mesh: expected comma-separated integer sizes"),
    ("--config.foo=1", '{"id": 1, "prompt": "a story"}\n', ("--config.foo=1",),
     r"generate: error: --config\.foo=1: this command reads no config.*\(train and compile do\)"),
])
def test_generate_refuses_in_one_line_before_loading(hf_dir, tmp_path, capsys, name, lines, extra, expected):
    assert cli_main(_generate(hf_dir, tmp_path, lines, *extra)) == 2
    assert re.search(expected, _error_line(capsys)), name
    assert not (tmp_path / "out.jsonl").exists() or name == "--mesh a,b"


def test_generate_output_that_is_a_directory(hf_dir, tmp_path, capsys):
    (tmp_path / "outdir").mkdir()
    argv = _generate(hf_dir, tmp_path, '{"id": 1, "prompt": "a story"}\n', output=tmp_path / "outdir")
    assert cli_main(argv) == 2
    assert "outdir: expected an output file, found a directory" in _error_line(capsys)


def test_generate_skips_a_non_utf8_line_with_one_line_and_runs_the_rest(hf_dir, tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    lines = b'{"id": 1, "prompt": "caf\xe9"}\n{"id": 2, "prompt": "a story"}\n'
    assert cli_main(_generate(hf_dir, tmp_path, lines, output=out)) == 1
    assert re.search(r"in\.jsonl:1: expected UTF-8 text, found byte 0xe9", _error_line(capsys))
    assert [json.loads(l)["id"] for l in out.read_text().splitlines()] == [2]


def test_generate_skips_a_record_with_int_content_and_runs_the_rest(hf_dir, tmp_path, capsys):
    lines = ('{"id": 1, "messages": [{"role": "user", "content": 5}]}\n'
             '{"id": 2, "prompt": "the story"}\n{"id": 3, "prompt": "a river"}\n')
    out = tmp_path / "out.jsonl.gz"
    assert cli_main(_generate(hf_dir, tmp_path, lines, output=out)) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "in.jsonl:1 field 'messages': expected a list of {role, content} objects" in err
    assert "1 bad record(s) skipped" in err
    assert sorted(json.loads(l)["id"] for l in gzip.open(out, "rt")) == [2, 3]   # the rest ran, compressed


@pytest.mark.parametrize("config_text,extra,expected", [
    ("def get_config(:\n", (), r"bad\.py:1: syntax error"),
    (None, ("--config.data.batch_size=0",), r"field 'data\.batch_size': expected a positive integer, got 0"),
    (None, ("--config.objective=nope",), r"field 'objective': unknown objective 'nope'; expected one of"),
    (None, ("--config.foo=1",), r"unknown config key 'foo'"),
    ("def get_config():\n    return 3\n", (), r"bad\.py: get_config\(\) returned a int"),
])
def test_train_refuses_in_one_line(tmp_path, capsys, config_text, extra, expected):
    config = "cpt_tiny"
    if config_text is not None:
        config = str(tmp_path / "bad.py")
        (tmp_path / "bad.py").write_text(config_text)
    assert cli_main(["train", "--config", config, "--workdir", str(tmp_path / "w"), *extra]) == 2
    assert re.search(expected, _error_line(capsys))
    assert not (tmp_path / "w").exists()


def test_aggregate_a_binary_scores_file(tmp_path, capsys, data_dir):
    scores = tmp_path / "scores.jsonl"
    scores.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)   # an image under a .jsonl name
    assert cli_main(["eval", "writingbench", "aggregate", "--scores", str(scores), "--data-dir", str(data_dir)]) == 2
    assert "scores.jsonl:1: expected UTF-8 text, found byte" in _error_line(capsys)


def test_convert_to_an_existing_file(hf_dir, tmp_path, capsys):
    dst = tmp_path / "dst"
    dst.write_text("keep me")
    assert cli_main(["convert", str(hf_dir), str(dst)]) == 2
    assert "dst: destination is an existing file; expected a new directory" in _error_line(capsys)
    assert dst.read_text() == "keep me"


def test_abbreviated_flags_are_not_taken_for_longer_ones(tmp_path, capsys):
    # `--model-mode` once read as a longer flag (argparse's prefix matching), at every level.
    with pytest.raises(SystemExit):
        cli_main(["eval", "refinebench", "--model-mode", "x", "--output", str(tmp_path / "out")])
    assert "unrecognised arguments: --model-mode x" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli_main(["generate", "--mod", "m", "--input", "i.jsonl", "--output", "o.jsonl"])
    assert "--model" in capsys.readouterr().err
