"""Tiny GGUF files for tests, written with the gguf library the way llama.cpp's converter lays them out:
`<arch>.*` hyperparameters, `blk.N.*` tensor names, and (llama architecture only) query/key rows
reordered for adjacent-pair RoPE. Built from small random transformers models, so a GGUF import can be
checked against the model it came from."""
import gguf
import numpy as np

_LAYER_NAMES = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
                "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
                "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
                "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
                "mlp.down_proj": "ffn_down"}


def gguf_name(hf_name: str) -> str:
    if hf_name == "lm_head.weight":
        return "output.weight"
    if hf_name == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf_name == "model.norm.weight":
        return "output_norm.weight"
    _, _, layer, rest = hf_name.split(".", 3)
    module, kind = rest.rsplit(".", 1)
    return f"blk.{layer}.{_LAYER_NAMES[module]}.{kind}"


def permute_for_llama_cpp(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's row order for llama-architecture q/k projections: each head's half-split rows
    (half h, pair p at h * dh/2 + p) interleaved as pairs (p * 2 + h)."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_divisors(head_dim: int, theta: float, factor: float, low: float, high: float, original: int):
    """The per-frequency divisors llama.cpp's converter stores as `rope_freqs.weight` for Llama-3 scaling."""
    inv = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    out = []
    for freq in inv:
        wavelen = 2 * np.pi / freq
        if wavelen < original / high:
            out.append(1.0)
        elif wavelen > original / low:
            out.append(factor)
        else:
            smooth = (original / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.asarray(out, np.float32)


def write_gguf(path, hf_model, arch: str, *, qtype=None, rope_freqs=None, tokenizer=None, extra=None,
               raw_type=None) -> str:
    """Writes `hf_model` (a transformers *ForCausalLM) as a GGUF of architecture `arch`. `qtype`: a
    gguf.GGMLQuantizationType for the 2-D weights (default F32); `tokenizer`: metadata from
    `byte_bpe_metadata`; `extra`: more key/values; `raw_type`: (GGUF tensor name, type) stored as zero
    blocks of that type (for types the gguf library cannot quantize to)."""
    cfg = hf_model.config
    heads, kv = cfg.num_attention_heads, cfg.num_key_value_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    if head_dim * heads != cfg.hidden_size:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(float(cfg.rope_parameters["rope_theta"] if getattr(cfg, "rope_parameters", None)
                               else cfg.rope_theta))
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_vocab_size(cfg.vocab_size)
    for key, value in (extra or {}).items():
        if isinstance(value, str):
            w.add_string(key, value)
        else:
            w.add_uint32(key, value)
    if tokenizer is not None:
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(tokenizer["pre"])
        w.add_token_list(tokenizer["tokens"])
        w.add_token_types(tokenizer["types"])
        w.add_token_merges(tokenizer["merges"])
        w.add_eos_token_id(tokenizer["eos"])
        if tokenizer.get("bos") is not None:
            w.add_bos_token_id(tokenizer["bos"])
            w.add_add_bos_token(bool(tokenizer.get("add_bos")))
        if tokenizer.get("chat_template"):
            w.add_chat_template(tokenizer["chat_template"])
    state = {k: v.detach().float().numpy() for k, v in hf_model.state_dict().items()}
    if cfg.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    for hf_name, value in state.items():
        name = gguf_name(hf_name)
        if raw_type is not None and raw_type[0] == name:
            block, size = gguf.GGML_QUANT_SIZES[raw_type[1]]
            w.add_tensor(name, np.zeros((value.shape[0], value.shape[1] // block * size), np.uint8),
                         raw_dtype=raw_type[1])
            continue
        if arch == "llama" and name.endswith(("attn_q.weight", "attn_k.weight")):
            value = permute_for_llama_cpp(value, heads if "attn_q" in name else kv)
        if qtype is not None and value.ndim == 2:
            w.add_tensor(name, gguf.quants.quantize(value, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(name, np.ascontiguousarray(value, np.float32))
    if rope_freqs is not None:
        w.add_tensor("rope_freqs.weight", np.asarray(rope_freqs, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def byte_bpe_metadata(hf_tokenizer_json: str, pre: str, *, special=(), eos: str, bos: str | None = None,
                      add_bos: bool = False, chat_template: str | None = None) -> dict:
    """GGUF tokenizer metadata (tokens, types, merges, ids) from a byte-level BPE tokenizer.json, as
    llama.cpp's converter writes it: added special tokens are CONTROL (3), the rest NORMAL (1)."""
    import json
    with open(hf_tokenizer_json, encoding="utf-8") as f:
        data = json.load(f)
    vocab = dict(data["model"]["vocab"])
    for added in data.get("added_tokens", []):
        vocab[added["content"]] = added["id"]
    tokens = [None] * len(vocab)
    for token, i in vocab.items():
        tokens[i] = token
    merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
    types = [3 if t in special else 1 for t in tokens]
    return {"pre": pre, "tokens": tokens, "types": types, "merges": merges, "eos": vocab[eos],
            "bos": vocab[bos] if bos else None, "add_bos": add_bos, "chat_template": chat_template}
