"""WritingBench critic prompt (byte for byte) and verdict parsing."""
import pytest

from jaxwrite.evals import critic_request, load_writingbench, parse_critic_output
from jaxwrite.prompts import critic_messages, official_prompt, official_prompt_source


@pytest.mark.parametrize("name, rel", [
    ("writingbench_critic_system", "writingbench/prompts/critic_system.txt"),
    ("writingbench_critic_user", "writingbench/prompts/critic_user.format.txt"),
    ("longbench_write_judge", "longbench_write/judge.txt"),
])
def test_official_prompts_are_byte_identical_to_shared_copies(data_dir, name, rel):
    assert official_prompt(name).encode("utf-8") == (data_dir / rel).read_bytes()
    source = official_prompt_source(name)
    assert source["licence"] == "Apache-2.0" and len(source["commit"]) == 40 and source["path"]


def _fill_by_hand(criteria: str, query: str, response: str) -> str:
    """The user template filled without str.format: literal replacement, then {{ }} -> { }."""
    template = official_prompt("writingbench_critic_user")
    assert template.count("{criteria}") == 2 and template.count("{query}") == 1
    marker = "\x00"
    text = template.replace("{{", marker + "(").replace("}}", marker + ")")
    text = text.replace("{criteria}", marker + "C").replace("{query}", marker + "Q").replace("{response}", marker + "R")
    return (text.replace(marker + "(", "{").replace(marker + ")", "}").replace(marker + "C", criteria)
            .replace(marker + "Q", query).replace(marker + "R", response))


def test_tiny_criteria_render_as_python_dict_repr():
    en = {"name": "Tone", "criteria_description": "It's formal"}
    zh = {"name": "语气", "1-2": "差"}
    user_en = critic_messages("Q", en, "R")[1]["content"]
    user_zh = critic_messages("Q", zh, "R")[1]["content"]
    assert user_en == _fill_by_hand("{'name': 'Tone', 'criteria_description': \"It's formal\"}", "Q", "R")
    assert user_zh == _fill_by_hand("{'name': '语气', '1-2': '差'}", "Q", "R")
    # the literal JSON braces of the output format survive, the criteria appear twice
    assert user_en.count('{\n    "score"') == 2 and user_en.count("'name': 'Tone'") == 2


def test_real_record_messages_match_hand_built_strings(data_dir):
    q = load_writingbench(data_dir)[2]
    crit = q.checklist[0]
    parts = []
    for key, value in crit.items():
        assert "\\" not in value and "\n" not in value and not ("'" in value and '"' in value)
        quote = '"' if "'" in value else "'"
        parts.append(f"'{key}': {quote}{value}{quote}")
    criteria = "{" + ", ".join(parts) + "}"
    assert '"Outline completely misinterprets' in criteria  # an apostrophe switched this value to "..."
    system, user = critic_messages(q.query, crit, "My outline.")
    assert system == {"role": "system", "content": official_prompt("writingbench_critic_system")}
    assert user == {"role": "user", "content": _fill_by_hand(criteria, q.query, "My outline.")}


def test_critic_request_uses_official_sampling():
    req = critic_request("Q", {"name": "n"}, "R", seed=5)
    s = req.sampling
    assert (s.temperature, s.top_p, s.top_k, s.max_new_tokens, s.seed) == (1.0, 0.95, None, 2048, 5)
    assert req.json_schema is None and [m["role"] for m in req.messages] == ["system", "user"]
    assert critic_request("Q", {"name": "n"}, "R", seed=5, constrain_json=True).json_schema["required"] == [
        "score", "reason"]


@pytest.mark.parametrize("text, expected", [
    ('```json\n{"score": 7, "reason": "solid"}\n```', (7, "solid")),
    ('{"score": 10, "reason": ""}', (10, "")),
    ('json{"score": 3.0, "reason": "r"}|', (3, "r")),
    ('{"score": 1, "reason": "引用"}', (1, "引用")),
])
def test_parse_valid_verdicts(text, expected):
    assert parse_critic_output(text) == expected


@pytest.mark.parametrize("text", [
    '{"score": 7.5, "reason": "r"}',        # not integral
    '{"score": "7", "reason": "r"}',        # string score
    '{"score": true, "reason": "r"}',       # bool is not a score
    '{"score": 0, "reason": "r"}', '{"score": 11, "reason": "r"}',
    '{"score": 7}', '{"score": 7, "reason": 3}',
    '[7, "r"]', "score: 7", "", '{"score": NaN, "reason": "r"}',
    '```json\n{"score": 7, "reason": "r"}\n```\n',  # trailing newline stops the official strip
    "{'score': 7, 'reason': 'r'}",          # a Python literal: never eval'd
])
def test_parse_invalid_verdicts(text):
    assert parse_critic_output(text) is None

