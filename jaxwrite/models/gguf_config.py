"""GGUF metadata -> ModelConfig for the architectures the one model class covers (llama, qwen2, qwen3).

llama.cpp names hyperparameters `<arch>.<key>`; the values that are not stored are read off the tensors
(vocabulary rows, tied head). Llama-3.1/3.2 files carry their RoPE scaling as a `rope_freqs` tensor of
per-frequency divisors instead of metadata; the Llama-3 parameters are recovered from it and checked to
reproduce every divisor, so the model (and an exported config.json) rotates exactly as the original.
"""
from __future__ import annotations

import numpy as np

from jaxwrite.common.errors import InputError
from jaxwrite.common.gguf_file import GGUFFile
from jaxwrite.models.config import ModelConfig, RopeScaling

GGUF_ARCHITECTURES = ("llama", "qwen2", "qwen3")


def _float32(value) -> float:
    """A float stored as float32 (1e-5 reads back as 9.99999974e-06), at its shortest round-trip value."""
    return float(str(np.float32(value)))


def _single(value, path: str, field: str) -> int:
    """A per-model integer that llama.cpp may also store per layer (an array): all layers must agree."""
    if isinstance(value, (list, tuple)):
        if not value or len(set(value)) != 1:
            raise InputError(f"per-layer values {sorted(set(value))} are not supported; expected one value for "
                             "every layer", path=path, field=field)
        value = value[0]
    return int(value)


def config_from_gguf(gfile: GGUFFile, dtype: str | None = None) -> ModelConfig:
    """The ModelConfig a GGUF file describes; an unsupported feature fails with a one-line error."""
    arch, path = gfile.architecture, gfile.path
    if arch not in GGUF_ARCHITECTURES:
        raise InputError(f"unsupported GGUF architecture '{arch}'; expected one of {', '.join(GGUF_ARCHITECTURES)}",
                         path=path, field="general.architecture")

    def key(name: str) -> str:
        return f"{arch}.{name}"

    if int(gfile.get("split.count") or 1) > 1:
        raise InputError(f"one part of a GGUF split into {gfile.get('split.count')} files; expected the whole model "
                         "in one file (join the parts with llama.cpp's `llama-gguf-split --merge`)", path=path,
                         field="split.count")
    if int(gfile.get(key("expert_count")) or 0):
        raise InputError("mixture-of-experts models are not supported; expected a dense model", path=path,
                         field=key("expert_count"))
    d_model = int(gfile.require(key("embedding_length")))
    heads = _single(gfile.require(key("attention.head_count")), path, key("attention.head_count"))
    kv_heads = _single(gfile.get(key("attention.head_count_kv"), heads), path, key("attention.head_count_kv"))
    head_dim = int(gfile.get(key("attention.key_length")) or d_model // heads)
    if int(gfile.get(key("attention.value_length")) or head_dim) != head_dim:
        raise InputError("value heads of another width than key heads are not supported; expected "
                         f"{head_dim}", path=path, field=key("attention.value_length"))
    rope_dims = int(gfile.get(key("rope.dimension_count")) or head_dim)
    if rope_dims != head_dim:
        raise InputError(f"partial rotary embedding ({rope_dims} of {head_dim} dimensions) is not supported; "
                         f"expected {head_dim}", path=path, field=key("rope.dimension_count"))
    embed = gfile.tensors.get("token_embd.weight")
    if embed is None:
        raise InputError("missing tensor 'token_embd.weight'", path=path)
    if arch == "llama" and "blk.0.attn_q.bias" in gfile.tensors:
        raise InputError("attention biases in a llama-architecture model are not supported; expected none",
                         path=path, field="blk.0.attn_q.bias")
    theta = float(gfile.get(key("rope.freq_base"), 10000.0))
    return ModelConfig(
        vocab_size=int(embed.shape[1]),                       # GGUF shapes list the fastest axis first
        d_model=d_model,
        num_layers=int(gfile.require(key("block_count"))),
        num_heads=heads,
        num_kv_heads=kv_heads,
        d_ff=_single(gfile.require(key("feed_forward_length")), path, key("feed_forward_length")),
        head_dim=head_dim,
        model_type=arch,
        qkv_bias=arch == "qwen2",
        qk_norm=arch == "qwen3",
        tie_embeddings="output.weight" not in gfile.tensors,
        rope_theta=theta,
        rope_scaling=_rope_scaling(gfile, key, head_dim, theta),
        rms_eps=_float32(gfile.get(key("attention.layer_norm_rms_epsilon"), 1e-6)),
        max_seq_len=int(gfile.get(key("context_length"), 32768)),
        dtype=dtype or "float32",
        param_dtype=dtype or "float32",
    )


def _rope_scaling(gfile: GGUFFile, key, head_dim: int, theta: float) -> RopeScaling | None:
    kind = gfile.get(key("rope.scaling.type"), "none")
    if "rope_freqs.weight" in gfile.tensors:
        from jaxwrite.models.gguf_io import dequantize
        divisors = dequantize(gfile.tensors["rope_freqs.weight"], gfile.path).reshape(-1)
        return llama3_scaling_from_divisors(divisors, head_dim, theta, gfile.path)
    if kind in ("none", None):
        return None
    if kind == "linear":
        return RopeScaling("linear", float(gfile.require(key("rope.scaling.factor"))))
    raise InputError(f"rope scaling '{kind}' is not supported; expected none, linear or Llama-3 rope_freqs",
                     path=gfile.path, field=key("rope.scaling.type"))


def llama3_scaling_from_divisors(divisors: np.ndarray, head_dim: int, theta: float,
                                 path: str) -> RopeScaling | None:
    """The Llama-3 RoPE scaling whose per-frequency divisors [head_dim // 2] are `divisors`.

    Between its two wavelength thresholds the scaling blends linearly in 1/wavelength, so two or more
    blended frequencies fix the line; the line fixes (original_max_position, low, high) up to a common
    scale, which cancels in every divisor, so low_freq_factor = 1 is taken. The result is checked to
    reproduce each divisor.
    """
    from jaxwrite.models.layers import rope_inv_freq

    divisors = np.asarray(divisors, np.float64)
    if divisors.shape != (head_dim // 2,):
        raise InputError(f"rope_freqs has {divisors.size} values; expected head_dim / 2 = {head_dim // 2}",
                         path=path, field="rope_freqs.weight")
    factor = float(divisors.max())
    if np.allclose(divisors, 1.0):
        return None
    inv = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    blended = (divisors > 1.0 + 1e-6) & (divisors < factor * (1 - 1e-6))
    found = None
    if blended.sum() >= 2:
        smooth = (1.0 / divisors[blended] - 1.0 / factor) / (1.0 - 1.0 / factor)
        slope, intercept = np.polyfit(inv[blended] / (2 * np.pi), smooth, 1)   # smooth = slope/wavelen + b
        if intercept < 0:
            high = round(1.0 - 1.0 / intercept, 6)
            found = RopeScaling("llama3", round(factor, 6), 1.0, high, int(round(-slope / intercept)))
    if found is not None:
        unscaled = np.asarray(rope_inv_freq(head_dim, theta, None), np.float64)
        scaled = np.asarray(rope_inv_freq(head_dim, theta, found), np.float64)
        if np.allclose(unscaled / scaled, divisors, rtol=1e-4):
            return found
    raise InputError("rope_freqs does not follow Llama-3 RoPE scaling (1 at high frequencies, a factor at low "
                     "ones, a blend between); expected a Llama-3.x file", path=path, field="rope_freqs.weight")
