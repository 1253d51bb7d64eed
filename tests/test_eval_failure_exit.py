"""`eval writingbench score` exits non-zero with the count when queries could not be scored (issue 29), as
`generate` does, so a pipeline notices: a judge server on 127.0.0.1 that answers one response with a
permanent 400."""
import json

from chat_server_support import scripted_chat_server
from jaxwrite.cli import main


def test_writingbench_score_exits_1_with_the_count_of_failed_queries(tmp_path, data_dir, capsys):
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps({"index": i, "response": text}) + "\n"
                                 for i, text in ((10, "An answer."), (11, "A response far too long"))))

    def answer(body):
        if "far too long" in body["messages"][-1]["content"]:
            return 400, "This model's maximum context length is 8 tokens"
        return '```json\n{"score": 7, "reason": "fine"}\n```'

    out = tmp_path / "s.jsonl"
    with scripted_chat_server(answer) as url:
        argv = ["eval", "writingbench", "score", "--responses", str(responses), "--judge", url,
                "--judge-model", "critic", "--output", str(out), "--data-dir", str(data_dir), "--indices", "10", "11"]
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert "1 queries could not be scored" in err and "exit status 1" in err and "permanent" in err
        assert [json.loads(line)["index"] for line in out.read_text().splitlines()] == [10]
        assert main(argv) == 1           # a re-run asks again and fails the same way: still non-zero
