"""GGUF import on tiny files written like llama.cpp's converter writes them (tests/gguf_writer.py): each
architecture's logits equal the transformers model it came from (llama's reordered q/k rows put back,
Llama-3 RoPE scaling recovered from `rope_freqs`), every supported tensor type dequantizes to what its
block format encodes, the tokenizer rebuilt from metadata encodes like transformers' GGUF tokenizer, and
bad files fail with one line naming the file and what was expected."""
import os
import struct

import gguf
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import jax.numpy as jnp  # noqa: E402
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

from gguf_writer import byte_bpe_metadata, llama3_rope_divisors, write_gguf  # noqa: E402
from jaxwrite.checkpoint import copy_tokenizer  # noqa: E402
from jaxwrite.cli import main as cli_main  # noqa: E402
from jaxwrite.common import InputError  # noqa: E402
from jaxwrite.common.gguf_file import GGUFFile  # noqa: E402
from jaxwrite.infer import load_for_inference  # noqa: E402
from jaxwrite.models import load_gguf, load_hf  # noqa: E402
from jaxwrite.models.gguf_io import dequantize  # noqa: E402
from jaxwrite.text import load_tokenizer  # noqa: E402

BASE = dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2, max_position_embeddings=256,
            rms_norm_eps=1e-5)
Q = gguf.GGMLQuantizationType


def _randomised(model):
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model.float().eval()


def _hf(kind: str, **extra):
    torch.manual_seed(0)
    kw = dict(BASE, **extra)
    if kind == "llama":
        return _randomised(transformers.LlamaForCausalLM(transformers.LlamaConfig(**kw)))
    if kind == "qwen2":
        return _randomised(transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**kw)))
    return _randomised(transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**kw)))


def _assert_same_logits(model, hf_model, atol=1e-4):
    tokens = np.random.default_rng(0).integers(0, BASE["vocab_size"], size=(2, 40)).astype(np.int32)
    with torch.no_grad():
        ref = hf_model(torch.tensor(tokens)).logits.numpy()
    np.testing.assert_allclose(np.asarray(model(jnp.asarray(tokens)).logits), ref, atol=atol, rtol=0)


@pytest.mark.parametrize("kind,extra", [
    ("llama", dict(num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)),
    ("llama", dict(num_attention_heads=4, num_key_value_heads=1, head_dim=32, tie_word_embeddings=True)),
    ("qwen2", dict(num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)),
    ("qwen3", dict(num_attention_heads=4, num_key_value_heads=2, head_dim=16, tie_word_embeddings=False)),
])
def test_each_architecture_matches_the_model_it_came_from(tmp_path, kind, extra):
    hf_model = _hf(kind, **extra)
    model = load_gguf(write_gguf(tmp_path / "m.gguf", hf_model, kind))
    assert model.cfg.model_type == kind and model.cfg.tie_embeddings == extra["tie_word_embeddings"]
    _assert_same_logits(model, hf_model)


def test_llama3_rope_scaling_is_recovered_from_rope_freqs(tmp_path, capsys):
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64}
    hf_model = _hf("llama", num_attention_heads=2, num_key_value_heads=1, rope_scaling=scaling)
    divisors = llama3_rope_divisors(32, 10000.0, 8.0, 1.0, 4.0, 64)
    path = write_gguf(tmp_path / "l3.gguf", hf_model, "llama", rope_freqs=divisors)
    model = load_gguf(path)
    s = model.cfg.rope_scaling
    assert (s.kind, s.factor, s.low_freq_factor, s.high_freq_factor, s.original_max_position) == \
        ("llama3", 8.0, 1.0, 4.0, 64)
    _assert_same_logits(model, hf_model)
    with pytest.raises(InputError, match="rope_freqs does not follow Llama-3"):
        load_gguf(write_gguf(tmp_path / "bad.gguf", hf_model, "llama", rope_freqs=divisors[::-1]))


def _spec_q4_k(block: bytes) -> np.ndarray:
    """One Q4_K block (144 bytes -> 256 values) decoded from its definition, for reference."""
    d, dmin = np.frombuffer(block[:4], np.float16).astype(np.float32)
    scales, qs = block[4:16], block[16:]
    out = []
    for j in range(4):
        for half in range(2):
            sc, m = _scale_min(2 * j + half, scales)
            nibbles = [(q >> (4 * half)) & 0xF for q in qs[32 * j:32 * j + 32]]
            out += [d * sc * n - dmin * m for n in nibbles]
    return np.asarray(out, np.float32)


def _scale_min(j: int, q: bytes) -> tuple[int, int]:
    if j < 4:
        return q[j] & 63, q[j + 4] & 63
    return (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4)


def _spec_q5_k(block: bytes) -> np.ndarray:
    d, dmin = np.frombuffer(block[:4], np.float16).astype(np.float32)
    scales, qh, ql = block[4:16], block[16:48], block[48:]
    out = []
    for j in range(4):
        for half in range(2):
            sc, m = _scale_min(2 * j + half, scales)
            bit = 1 << (2 * j + half)
            out += [d * sc * (((ql[32 * j + i] >> (4 * half)) & 0xF) + (16 if qh[i] & bit else 0)) - dmin * m
                    for i in range(32)]
    return np.asarray(out, np.float32)


def _spec_q6_k(block: bytes) -> np.ndarray:
    ql, qh = block[:128], block[128:192]
    sc = np.frombuffer(block[192:208], np.int8).astype(np.float32)
    d = np.frombuffer(block[208:210], np.float16).astype(np.float32)[0]
    out = np.zeros(256, np.float32)
    for n in range(2):
        for i in range(32):
            lo, hi, h = ql[64 * n + i], ql[64 * n + i + 32], qh[32 * n + i]
            values = ((lo & 0xF) | ((h & 3) << 4), (hi & 0xF) | (((h >> 2) & 3) << 4),
                      (lo >> 4) | (((h >> 4) & 3) << 4), (hi >> 4) | (((h >> 6) & 3) << 4))
            for k, q in enumerate(values):
                out[128 * n + 32 * k + i] = d * sc[8 * n + i // 16 + 2 * k] * (q - 32)
    return out


def _random_k_blocks(qtype, rows: int, rng) -> np.ndarray:
    """Random K-quant blocks whose float16 scales are small finite numbers."""
    size = gguf.GGML_QUANT_SIZES[qtype][1]
    raw = rng.integers(0, 256, size=(rows, size), dtype=np.uint8)
    halves = rng.uniform(0.01, 0.1, size=(rows, 2)).astype(np.float16).view(np.uint8)
    if qtype == Q.Q6_K:
        raw[:, 208:210] = halves[:, :2]
    else:
        raw[:, 0:4] = halves
    return raw


def test_every_supported_tensor_type_dequantizes_to_its_block_format(tmp_path):
    rng = np.random.default_rng(0)
    values = rng.normal(size=(4, 256)).astype(np.float32)        # [rows, cols]: cols span whole K blocks
    w = gguf.GGUFWriter(str(tmp_path / "types.gguf"), "llama")
    w.add_tensor("f32", values)
    w.add_tensor("f16", values.astype(np.float16))
    w.add_tensor("bf16", gguf.quants.quantize(values, Q.BF16), raw_dtype=Q.BF16)
    for qtype in (Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1):
        w.add_tensor(qtype.name, gguf.quants.quantize(values, qtype), raw_dtype=qtype)
    blocks = {qtype: _random_k_blocks(qtype, 4, rng) for qtype in (Q.Q4_K, Q.Q5_K, Q.Q6_K, Q.Q2_K, Q.Q3_K)}
    for qtype, raw in blocks.items():
        w.add_tensor(qtype.name, raw, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    gfile = GGUFFile(tmp_path / "types.gguf")

    def read(name):
        out = dequantize(gfile.tensors[name], gfile.path)
        assert out.shape == (4, 256) and out.dtype == np.float32
        return out

    np.testing.assert_array_equal(read("f32"), values)
    np.testing.assert_array_equal(read("f16"), values.astype(np.float16).astype(np.float32))
    np.testing.assert_allclose(read("bf16"), values, rtol=2 ** -8)
    # Block quantization: every value within one quantization step of its block's range.
    for name, levels in (("Q8_0", 254), ("Q4_0", 15), ("Q4_1", 15), ("Q5_0", 31), ("Q5_1", 31)):
        spread = np.ptp(values.reshape(-1, 32), axis=1, keepdims=True) * 2   # >= the block's quantized range
        assert (np.abs(read(name) - values).reshape(-1, 32) <= spread / levels).all(), name
    for qtype, spec in ((Q.Q4_K, _spec_q4_k), (Q.Q5_K, _spec_q5_k), (Q.Q6_K, _spec_q6_k)):
        expected = np.stack([spec(bytes(row)) for row in blocks[qtype]])
        np.testing.assert_allclose(read(qtype.name), expected, rtol=1e-6, atol=1e-6)
    for name in ("Q2_K", "Q3_K"):
        assert np.isfinite(read(name)).all()


_SPLITS = {"llama-bpe": (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
                         r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
           "qwen2": (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                     r"|\s*[\r\n]+|\s+(?!\S)|\s+")}
TEXTS = ["The keeper's 1897 letter, dated 04-12: \"Come home.\"", "  two spaces\n\n\tand a tab; CRLF\r\nend",
         "Émile's café — naïve résumé; 東京 🙂", "<|im_start|>user\nwhole<|im_end|>", "I'LL don't WE'VE 123456"]


TEMPLATE = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"


def _tiny_gguf_with_tokenizer(tmp_path, pre: str, arch: str):
    """(GGUF path, its tokenizer metadata, the transformers model): a small byte-level BPE trained here,
    split the way `pre` names, written into the GGUF beside a random model of its vocabulary."""
    specials = ["<|bos|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(_SPLITS[pre]), "isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    text = [t * 3 for t in TEXTS] + ["the river runs at night through the city of writing models"] * 20
    tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.save(str(tmp_path / "tokenizer.json"))
    meta = byte_bpe_metadata(str(tmp_path / "tokenizer.json"), pre, special=specials, eos="<|im_end|>",
                             bos="<|bos|>", add_bos=arch == "llama", chat_template=TEMPLATE)
    hf_model = _hf(arch, num_attention_heads=4, num_key_value_heads=2, vocab_size=tok.get_vocab_size())
    return write_gguf(tmp_path / "t.gguf", hf_model, arch, tokenizer=meta), meta, hf_model


@pytest.mark.parametrize("pre,arch", [("llama-bpe", "llama"), ("qwen2", "qwen2")])
def test_tokenizer_from_metadata_encodes_like_transformers(tmp_path, pre, arch):
    path, meta, _ = _tiny_gguf_with_tokenizer(tmp_path, pre, arch)
    template = TEMPLATE
    ours = load_tokenizer(path)
    ref = transformers.AutoTokenizer.from_pretrained(tmp_path, gguf_file="t.gguf")
    for text in TEXTS:
        ids = ours.encode(text)
        assert ids == ref(text, add_special_tokens=False)["input_ids"], text
        assert ours.decode(ids) == ref.decode(ids, skip_special_tokens=True)
        # tokenizer.ggml.add_bos_token: BOS first, as llama.cpp and Llama-3's own tokenizer.json add it.
        assert ours.encode(text, add_special_tokens=True) == ([meta["bos"]] if meta["add_bos"] else []) + ids
    messages = [{"role": "user", "content": "hi"}]
    assert ours.apply_chat_template(messages, add_generation_prompt=False) == \
        ref.apply_chat_template(messages, tokenize=False, chat_template=template)
    assert ours.eos_ids == (meta["eos"],) and ours.bos_id == meta["bos"]
    # Stored with a run or model dir (as `convert` and the trainer do): tokenizer.json and its configs,
    # read back the same; the GGUF's weights are not copied.
    copy_tokenizer(path, str(tmp_path / "run"))
    assert sorted(os.listdir(tmp_path / "run" / "tokenizer")) == ["generation_config.json", "tokenizer.json",
                                                                   "tokenizer_config.json"]
    again = load_tokenizer(str(tmp_path / "run" / "tokenizer"))
    assert [again.encode(t, add_special_tokens=True) for t in TEXTS] == \
        [ours.encode(t, add_special_tokens=True) for t in TEXTS]
    assert again.chat_template == template and again.eos_ids == ours.eos_ids


def test_convert_gguf_to_a_model_dir_and_on_to_hf(tmp_path, capsys):
    path, _, hf_model = _tiny_gguf_with_tokenizer(tmp_path, "llama-bpe", "llama")
    assert cli_main(["convert", path, str(tmp_path / "jw")]) == 0             # GGUF -> jaxwrite model dir
    model, tokenizer = load_for_inference(str(tmp_path / "jw"))
    _assert_same_logits(model, hf_model)
    assert tokenizer.encode(TEXTS[0], add_special_tokens=True) == load_tokenizer(path).encode(
        TEXTS[0], add_special_tokens=True)
    assert cli_main(["convert", str(tmp_path / "jw"), str(tmp_path / "hf")]) == 0   # -> Hugging Face dir
    exported = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").float().eval()
    _assert_same_logits(model, exported)
    assert transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")(TEXTS[0])["input_ids"] == \
        tokenizer.encode(TEXTS[0], add_special_tokens=True)


def test_model_info_reads_gguf_metadata(tmp_path, capsys):
    hf_model = _hf("llama", num_attention_heads=4, num_key_value_heads=2)
    path = write_gguf(tmp_path / "m.gguf", hf_model, "llama")
    assert cli_main(["model", "info", path, "--json"]) == 0
    assert f'"params": {sum(p.numel() for p in hf_model.parameters())}' in capsys.readouterr().out


# --- bad input: one line naming the file and what was expected -------------------------------------------


def _one_line(err: Exception, *needles: str) -> None:
    text = str(err)
    assert "\n" not in text, text
    for needle in needles:
        assert needle in text, text


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    hf_model = _hf("llama", num_attention_heads=4, num_key_value_heads=2)
    return write_gguf(tmp_path_factory.mktemp("bad") / "tiny.gguf", hf_model, "llama"), hf_model


def test_a_truncated_gguf_is_named(tiny_gguf, tmp_path):
    path, _ = tiny_gguf
    data = open(path, "rb").read()
    for cut in (len(data) - 1000, 200):        # inside the tensor data; inside the header
        part = tmp_path / f"cut{cut}.gguf"
        part.write_bytes(data[:cut])
        with pytest.raises(InputError) as err:
            load_gguf(str(part))
        _one_line(err.value, str(part), "truncated", "expected a complete file")
    (tmp_path / "not.gguf").write_bytes(b"PK\x03\x04" + data[4:])
    with pytest.raises(InputError) as err:
        load_gguf(str(tmp_path / "not.gguf"))
    _one_line(err.value, "not a GGUF file", "GGUF")


def test_an_unknown_architecture_or_tensor_type_is_named(tiny_gguf, tmp_path):
    path, hf_model = tiny_gguf
    with pytest.raises(InputError) as err:
        load_gguf(write_gguf(tmp_path / "mamba.gguf", hf_model, "mamba"))
    _one_line(err.value, "mamba.gguf", "unsupported GGUF architecture 'mamba'", "llama, qwen2, qwen3")
    with pytest.raises(InputError) as err:
        load_gguf(write_gguf(tmp_path / "iq.gguf", hf_model, "llama", raw_type=("blk.1.ffn_up.weight", Q.IQ4_NL)))
    _one_line(err.value, "iq.gguf", "blk.1.ffn_up.weight", "type IQ4_NL is not supported", "Q4_K")
    with pytest.raises(InputError) as err:
        load_gguf(write_gguf(tmp_path / "part1.gguf", hf_model, "llama", extra={"split.count": 3}))
    _one_line(err.value, "part1.gguf", "split into 3 files", "expected the whole model in one file")
    # A type id the gguf library does not know at all (a newer llama.cpp's).
    data = bytearray(open(path, "rb").read())
    name = b"token_embd.weight"
    at = data.index(name) + len(name)
    dims = struct.unpack_from("<I", data, at)[0]
    struct.pack_into("<I", data, at + 4 + 8 * dims, 250)
    (tmp_path / "future.gguf").write_bytes(bytes(data))
    with pytest.raises(InputError) as err:
        load_gguf(str(tmp_path / "future.gguf"))
    _one_line(err.value, "future.gguf", "unknown GGUF tensor type", "250")


def test_a_truncated_safetensors_file_is_named(tmp_path):
    hf_model = _hf("llama", num_attention_heads=4, num_key_value_heads=2)
    hf_model.save_pretrained(tmp_path / "hf")
    weights = tmp_path / "hf" / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[:len(data) // 2])
    with pytest.raises(InputError) as err:
        load_hf(str(tmp_path / "hf"))
    _one_line(err.value, str(weights), "truncated safetensors file", "expected a complete file")
    assert os.path.getsize(weights) < len(data)


def test_a_file_opened_again_is_read_once_until_it_changes(tiny_gguf, tmp_path):
    """A run reads one GGUF for its architecture, tokenizer and weights: the process keeps the parsed file,
    and a file rewritten at the same path is read afresh."""
    from jaxwrite.common.gguf_file import open_gguf

    path, hf_model = tiny_gguf
    first = open_gguf(path)
    assert open_gguf(str(path)) is first and open_gguf(first) is first
    copy = tmp_path / "copy.gguf"
    copy.write_bytes(open(path, "rb").read())
    assert open_gguf(copy) is not first
    write_gguf(copy, hf_model, "llama", extra={"general.name": "rewritten"})
    assert open_gguf(copy).get("general.name") == "rewritten"
