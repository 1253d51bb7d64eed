"""Hugging Face tokenizer.json backend: ids, decoding and chat templates against transformers."""
import json

import pytest

from jaxwrite.common import InputError
from jaxwrite.text import HFTokenizer, StreamDecoder, load_tokenizer

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

# A Qwen2.5-Instruct-style chat template (default system prompt, tool-call and tool-response branches).
QWEN25_TEMPLATE = """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""

# Qwen2's pre-tokenizer split (digits one at a time, contractions, punctuation runs, newlines).
QWEN_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
              r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TRAIN_TEXT = ("It was the best of times, it was the worst of times. Don't stop; we'll see 1,234 items!\n"
              "中文写作测试，你好世界。长篇写作需要结构清晰。\n") * 50


def _write_qwen_like(directory, template_in_config=True):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([TRAIN_TEXT], trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    tok.save(str(directory / "tokenizer.json"))
    ids = {t: tok.token_to_id(t) for t in SPECIALS}
    config = {"tokenizer_class": "Qwen2Tokenizer", "bos_token": None, "eos_token": "<|im_end|>",
              "pad_token": "<|endoftext|>", "unk_token": None, "clean_up_tokenization_spaces": False,
              "model_max_length": 32768, "errors": "replace", "split_special_tokens": False,
              "additional_special_tokens": ["<|im_start|>", "<|im_end|>"]}
    if template_in_config:
        config["chat_template"] = QWEN25_TEMPLATE
    (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    generation = {"bos_token_id": ids["<|endoftext|>"], "pad_token_id": ids["<|endoftext|>"],
                  "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]]}
    (directory / "generation_config.json").write_text(json.dumps(generation), encoding="utf-8")
    return ids


@pytest.fixture(scope="module")
def qwen_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("qwen")
    _write_qwen_like(directory)
    return directory


@pytest.fixture(scope="module")
def reference(qwen_dir):
    return transformers.AutoTokenizer.from_pretrained(str(qwen_dir))


CONVERSATIONS = [
    [{"role": "user", "content": "Write a 3,000-word essay."}],
    [{"role": "system", "content": "You are a careful editor."}, {"role": "user", "content": "Fix this: teh cat"}],
    [{"role": "user", "content": "写一篇不少于800字的文章。"}, {"role": "assistant", "content": "好的。\n\n第一段……"},
     {"role": "user", "content": "再长一点，  加上结尾。"}],
    [{"role": "system", "content": "S"}, {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
     {"role": "system", "content": "mid-chat system"}, {"role": "user", "content": "c"}],
]


@pytest.mark.parametrize("add_generation_prompt", [True, False])
@pytest.mark.parametrize("conversation", range(len(CONVERSATIONS)))
def test_chat_template_matches_transformers(qwen_dir, reference, conversation, add_generation_prompt):
    tok = load_tokenizer(qwen_dir)
    messages = CONVERSATIONS[conversation]
    ours = tok.apply_chat_template(messages, add_generation_prompt=add_generation_prompt)
    theirs = reference.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)
    assert ours == theirs
    assert ("You are Qwen, created by Alibaba Cloud." in ours) == (messages[0]["role"] != "system")
    assert tok.encode_chat(messages, add_generation_prompt) == reference.encode(theirs, add_special_tokens=False)


def test_tool_branch_matches_transformers(qwen_dir, reference):
    tok = load_tokenizer(qwen_dir)
    tools = [{"type": "function", "function": {"name": "count_words", "description": "Zählt Wörter",
                                                "parameters": {"type": "object", "properties": {}}}}]
    messages = [{"role": "user", "content": "How long is it?"},
                {"role": "assistant", "content": None,
                 "tool_calls": [{"type": "function", "function": {"name": "count_words", "arguments": {"t": "x"}}}]},
                {"role": "tool", "content": "42"}]
    ours = tok.apply_chat_template(messages, tools=tools)
    assert ours == reference.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    assert "Zählt Wörter" in ours  # tojson keeps non-ASCII, as transformers' filter does


TEXTS = ["Hello   world\n\n  It's 2024: 1,234 items!", "中文写作，长篇。 mixed 中英 text", "tab\there <|im_end|> after",
         "emoji 🙂 e\u0301 (NFC-normalised)", ""]


@pytest.mark.parametrize("text", TEXTS)
def test_encode_decode_match_transformers(qwen_dir, reference, text):
    tok = load_tokenizer(qwen_dir / "tokenizer.json")
    ids = tok.encode(text)
    assert ids == reference.encode(text, add_special_tokens=False)
    assert tok.encode(text, add_special_tokens=True) == reference.encode(text, add_special_tokens=True)
    for skip in (True, False):
        assert tok.decode(ids, skip_special_tokens=skip) == reference.decode(ids, skip_special_tokens=skip)


def test_special_ids_match_transformers(qwen_dir, reference):
    tok = load_tokenizer(qwen_dir)
    assert isinstance(tok, HFTokenizer)
    assert tok.vocab_size == len(reference)
    assert tok.eos_ids == (reference.convert_tokens_to_ids("<|im_end|>"), reference.convert_tokens_to_ids("<|endoftext|>"))
    assert tok.pad_id == reference.pad_token_id
    assert tok.bos_id is None and reference.bos_token_id is None
    assert tok.special_tokens == {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
    assert tok.id_to_token(tok.eos_ids[0]) == "<|im_end|>" and tok.token_to_id("<|nope|>") is None


def test_template_sources(tmp_path):
    """chat_template.jinja wins over the config; a list of named templates yields "default"."""
    _write_qwen_like(tmp_path, template_in_config=False)
    tok = load_tokenizer(tmp_path)
    with pytest.raises(InputError, match="no chat template"):
        tok.apply_chat_template([{"role": "user", "content": "x"}])
    config_path = tmp_path / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["chat_template"] = [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D{{ eos_token }}"}]
    config_path.write_text(json.dumps(config))
    assert load_tokenizer(tmp_path).apply_chat_template([{"role": "user", "content": "x"}]) == "D<|im_end|>"
    (tmp_path / "chat_template.jinja").write_text("{% for m in messages %}[{{ m.content }}]{% endfor %}")
    assert load_tokenizer(tmp_path).apply_chat_template([{"role": "user", "content": "x"}]) == "[x]"
    config["chat_template"] = [{"name": "tool_use", "template": "T"}]
    config_path.write_text(json.dumps(config))
    (tmp_path / "chat_template.jinja").unlink()
    with pytest.raises(InputError, match="field 'chat_template'"):
        load_tokenizer(tmp_path)


def test_eos_from_config_json_when_no_generation_config(tmp_path):
    ids = _write_qwen_like(tmp_path)
    (tmp_path / "generation_config.json").unlink()
    (tmp_path / "config.json").write_text(json.dumps({"eos_token_id": ids["<|endoftext|>"]}))
    assert load_tokenizer(tmp_path).eos_ids == (ids["<|endoftext|>"], ids["<|im_end|>"])
    (tmp_path / "config.json").write_text(json.dumps({"eos_token_id": "2"}))
    with pytest.raises(InputError, match="config.json field 'eos_token_id'"):
        load_tokenizer(tmp_path)


def test_broken_tokenizer_json(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{broken")
    with pytest.raises(InputError, match="tokenizer.json: expected a Hugging Face tokenizer.json"):
        load_tokenizer(tmp_path)


def test_stream_decoder_byte_level(qwen_dir):
    tok = load_tokenizer(qwen_dir)
    text = "长篇写作 🙂 needs care: é, 中文。"
    ids = tok.encode(text)
    stream = StreamDecoder(tok)
    pieces = [stream.push(i) for i in ids]
    assert "".join(pieces) + stream.flush() == text
    assert not any("\ufffd" in p for p in pieces)
    assert "" in pieces  # a multi-byte character was held back until complete


def test_byte_level_token_bytes_spell_the_text_exactly(qwen_dir):
    """Byte-level tokens map back to their bytes (partial UTF-8 characters included); special tokens
    add nothing; concatenated they are the decoded text's UTF-8."""
    tok = load_tokenizer(qwen_dir)
    table = tok.token_bytes()
    assert len(table) == tok.vocab_size
    assert all(table[tok.token_to_id(t)] is None for t in SPECIALS)
    for text in ("中文写作测试，你好世界。", "Don't stop; we'll see 1,234 items!\n", "罕见字 ŋ 🙂"):
        ids = tok.encode(text)
        assert b"".join(table[i] for i in ids) == text.encode("utf-8") and tok.decode(ids) == text
    assert any(b is not None and _not_utf8(b) for b in table)


def _not_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return False
    except UnicodeDecodeError:
        return True
