"""SentencePiece training, loading, round trips, chat encoding, streaming and the tokenizer CLI."""
import json

import pytest

from jaxwrite.cli import main as cli_main
from jaxwrite.common import InputError
from jaxwrite.text import (CHAT_SPECIAL_TOKENS, SentencePieceTokenizer, StreamDecoder, load_tokenizer,
                           train_sentencepiece)


@pytest.fixture(scope="module")
def corpus(data_dir, tmp_path_factory):
    text = (data_dir / "corpus_en" / "pg11.txt").read_text(encoding="utf-8-sig")[:200_000]
    path = tmp_path_factory.mktemp("corpus") / "alice.txt"
    path.write_text(text + "\n写作 中文 测试\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def sp_dir(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("sp")
    train_sentencepiece([str(corpus)], str(out), vocab_size=800)
    return out


SAMPLES = [
    "Alice was beginning to get very tired of sitting by her sister on the bank.",
    "  two leading spaces,\n\nnew paragraphs\tand a tab   \n",
    "中文写作：你好，世界！ mixed with English 123.",
    "emoji 🙂 and rare ŋ letters fall back to bytes",
]


def test_round_trip_is_exact(sp_dir):
    tok = load_tokenizer(sp_dir)
    assert isinstance(tok, SentencePieceTokenizer)
    for text in SAMPLES:
        assert tok.decode(tok.encode(text)) == text


def test_special_tokens_ids_and_files(sp_dir):
    tok = load_tokenizer(sp_dir)
    ids = {t: tok.token_to_id(t) for t in CHAT_SPECIAL_TOKENS}
    assert all(i is not None for i in ids.values())
    assert tok.eos_ids == (ids["<|im_end|>"], ids["<|endoftext|>"])
    assert tok.pad_id == tok.token_to_id("<pad>") and tok.pad_id not in tok.eos_ids
    assert tok.bos_id is None
    assert tok.vocab_size == 800
    assert tok.token_to_id("no such piece") is None
    assert tok.id_to_token(ids["<|im_start|>"]) == "<|im_start|>"
    with pytest.raises(ValueError):
        tok.id_to_token(800)
    # markup in text is one id each; skip_special_tokens drops it, otherwise it round-trips
    text = "<|im_start|>user\nHi<|im_end|>\n"
    ids_text = tok.encode(text)
    assert ids_text[0] == ids["<|im_start|>"] and ids["<|im_end|>"] in ids_text
    assert tok.decode(ids_text, skip_special_tokens=False) == text
    assert tok.decode(ids_text) == "user\nHi\n"
    assert tok.decode([tok.pad_id] + tok.encode("ok"), skip_special_tokens=True) == "ok"


def test_chatml_template(sp_dir):
    tok = load_tokenizer(sp_dir / "tokenizer.model")
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "写一首诗"}]
    text = tok.apply_chat_template(messages)
    assert text == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n写一首诗<|im_end|>\n"
                    "<|im_start|>assistant\n")
    assert tok.apply_chat_template(messages, add_generation_prompt=False).endswith("写一首诗<|im_end|>\n")
    ids = tok.encode_chat(messages)
    assert ids.count(tok.token_to_id("<|im_start|>")) == 3
    assert tok.decode(ids, skip_special_tokens=False) == text


def test_stream_decoder_matches_full_decode(sp_dir):
    tok = load_tokenizer(sp_dir)
    for text in SAMPLES:
        ids = tok.encode(text)
        stream = StreamDecoder(tok)
        pieces = [stream.push(i) for i in ids]
        assert "".join(pieces) + stream.flush() == tok.decode(ids)
        assert not any("\ufffd" in p for p in pieces)


def test_training_is_deterministic(corpus, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        train_sentencepiece([str(corpus)], str(out), vocab_size=400, input_sentence_size=500, model_type="unigram")
    assert (a / "tokenizer.model").read_bytes() == (b / "tokenizer.model").read_bytes()


def test_bad_inputs_name_the_file(tmp_path, corpus):
    with pytest.raises(InputError, match="tokenizer.json or tokenizer.model"):
        load_tokenizer(tmp_path)
    broken = tmp_path / "tokenizer.model"
    broken.write_bytes(b"not a model")
    with pytest.raises(InputError, match="tokenizer.model.*SentencePiece"):
        load_tokenizer(tmp_path)
    with pytest.raises(InputError, match="training text file not found"):
        train_sentencepiece([str(tmp_path / "missing.txt")], str(tmp_path / "o"), vocab_size=300)
    bad_utf8 = tmp_path / "bad.txt"
    bad_utf8.write_bytes(b"fine line\nbad \xff byte\n")
    with pytest.raises(InputError, match=r"bad.txt:2: expected UTF-8"):
        train_sentencepiece([str(bad_utf8)], str(tmp_path / "o"), vocab_size=300)
    with pytest.raises(InputError, match="SentencePiece training failed"):
        train_sentencepiece([str(corpus)], str(tmp_path / "o"), vocab_size=100_000, input_sentence_size=200)


def test_broken_config_names_file_and_field(sp_dir, tmp_path):
    for name in ("tokenizer.model", "generation_config.json"):
        (tmp_path / name).write_bytes((sp_dir / name).read_bytes())
    (tmp_path / "tokenizer_config.json").write_text('{"eos_token": "<|im_end|>",', encoding="utf-8")
    with pytest.raises(InputError, match="tokenizer_config.json:1: invalid JSON"):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<nope>"}), encoding="utf-8")
    with pytest.raises(InputError, match="field 'eos_token': token '<nope>' is not in the vocabulary"):
        load_tokenizer(tmp_path)


def test_cli_train_and_encode(corpus, tmp_path, capsys):
    out = tmp_path / "tok"
    assert cli_main(["tokenizer", "train", "--input", str(corpus), "--output", str(out),
                     "--vocab-size", "500", "--input-sentence-size", "2000"]) == 0
    assert "vocab_size=500" in capsys.readouterr().out
    assert cli_main(["tokenizer", "encode", "--tokenizer", str(out), "--text", "Alice", "--chat", "--pieces"]) == 0
    ids_line, pieces_line = capsys.readouterr().out.strip().splitlines()
    tok = load_tokenizer(out)
    assert [int(i) for i in ids_line.split()] == tok.encode_chat([{"role": "user", "content": "Alice"}])
    assert json.loads(pieces_line)[0] == "<|im_start|>"
    assert cli_main(["tokenizer", "encode", "--tokenizer", str(tmp_path / "none"), "--text", "x"]) == 2
    assert "tokenizer not found" in capsys.readouterr().err


def test_token_bytes_spell_the_text_exactly(sp_dir):
    """Each token's bytes (byte-fallback pieces one byte each) concatenate to the decoded text."""
    tok = load_tokenizer(sp_dir)
    table = tok.token_bytes()
    assert len(table) == tok.vocab_size and all(table[i] is None for i in tok.eos_ids)
    for text in SAMPLES:
        ids = tok.encode(text)
        assert b"".join(table[i] for i in ids) == text.encode("utf-8")
    partial = [b for b in table if b is not None and len(b) == 1 and b[0] >= 0x80]
    assert len(partial) == 128                  # the byte pieces past ASCII: parts of characters
