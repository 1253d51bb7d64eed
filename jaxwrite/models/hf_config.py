"""Hugging Face `config.json` <-> ModelConfig for the architectures jaxwrite covers."""
from __future__ import annotations

import json
import os

from jaxwrite.common.errors import InputError
from jaxwrite.models.config import ModelConfig, RopeScaling

_ARCH = {"qwen2": "Qwen2ForCausalLM", "llama": "LlamaForCausalLM", "qwen3": "Qwen3ForCausalLM"}
_REQUIRED = ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
             "vocab_size")


def read_hf_config(path: str) -> dict:
    cfg_path = os.path.join(path, "config.json")
    if not os.path.isdir(path):
        raise InputError("not a directory; expected a Hugging Face model directory", path=path)
    if not os.path.exists(cfg_path):
        raise InputError("missing config.json; expected a Hugging Face model directory", path=path)
    try:
        with open(cfg_path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise InputError(f"invalid JSON ({e.msg})", path=cfg_path, line=e.lineno) from None


def config_from_hf(hf: dict, source: str = "config.json", dtype: str | None = None) -> ModelConfig:
    """Maps an HF config dict to ModelConfig; unsupported features fail with a one-line error."""
    for key in _REQUIRED:
        if key not in hf:
            raise InputError("missing required key", path=source, field=key)
    model_type = hf["model_type"]
    if model_type not in _ARCH:
        raise InputError(f"unsupported model_type '{model_type}'; expected one of {', '.join(_ARCH)}",
                         path=source, field="model_type")
    if hf.get("use_sliding_window"):
        raise InputError("sliding-window attention is not supported; expected false",
                         path=source, field="use_sliding_window")
    if hf.get("mlp_bias"):
        raise InputError("MLP bias is not supported; expected false", path=source, field="mlp_bias")
    act = hf.get("hidden_act", "silu")
    if act != "silu":
        raise InputError(f"activation '{act}' is not supported; expected silu", path=source, field="hidden_act")
    if model_type == "qwen2":
        qkv_bias = True  # Qwen2 attention always has q/k/v bias
    else:
        qkv_bias = bool(hf.get("attention_bias", False))
        if qkv_bias:
            raise InputError("attention_bias=true (bias on o_proj too) is not supported; expected false",
                             path=source, field="attention_bias")
    rope = hf.get("rope_parameters") or {}
    theta = hf.get("rope_theta", rope.get("rope_theta", 10000.0))
    scaling_dict = hf.get("rope_scaling") or (rope if rope.get("rope_type", "default") != "default" else None)
    scaling = None
    if scaling_dict:
        kind = scaling_dict.get("rope_type", scaling_dict.get("type", "default"))
        if kind == "llama3":
            scaling = RopeScaling("llama3", float(scaling_dict["factor"]), float(scaling_dict["low_freq_factor"]),
                                  float(scaling_dict["high_freq_factor"]),
                                  int(scaling_dict["original_max_position_embeddings"]))
        elif kind == "linear":
            scaling = RopeScaling("linear", float(scaling_dict["factor"]))
        elif kind != "default":
            raise InputError(f"rope scaling '{kind}' is not supported; expected llama3 or linear",
                             path=source, field="rope_scaling")
    heads = int(hf["num_attention_heads"])
    return ModelConfig(
        vocab_size=int(hf["vocab_size"]),
        d_model=int(hf["hidden_size"]),
        num_layers=int(hf["num_hidden_layers"]),
        num_heads=heads,
        num_kv_heads=int(hf.get("num_key_value_heads") or heads),
        d_ff=int(hf["intermediate_size"]),
        head_dim=hf.get("head_dim"),
        model_type=model_type,
        qkv_bias=qkv_bias,
        qk_norm=model_type == "qwen3",
        tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
        rope_theta=float(theta),
        rope_scaling=scaling,
        rms_eps=float(hf.get("rms_norm_eps", 1e-6)),
        max_seq_len=int(hf.get("max_position_embeddings", 32768)),
        dtype=dtype or "float32",
        param_dtype=dtype or "float32",
    )


def config_to_hf(cfg: ModelConfig, dtype: str = "float32", extra: dict | None = None) -> dict:
    """An HF config dict that `transformers` loads as the matching *ForCausalLM."""
    hf = {
        "architectures": [_ARCH[cfg.model_type]],
        "model_type": cfg.model_type,
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.d_model,
        "intermediate_size": cfg.d_ff,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_heads,
        "num_key_value_heads": cfg.num_kv_heads,
        "head_dim": cfg.dim_head,
        "hidden_act": "silu",
        "max_position_embeddings": cfg.max_seq_len,
        "rms_norm_eps": cfg.rms_eps,
        "rope_theta": cfg.rope_theta,
        "tie_word_embeddings": cfg.tie_embeddings,
        "attention_dropout": 0.0,
        "torch_dtype": dtype,
        "use_cache": True,
    }
    if cfg.model_type == "qwen2":
        hf.update(use_sliding_window=False, sliding_window=None, max_window_layers=cfg.num_layers)
    else:
        hf.update(attention_bias=False, mlp_bias=False)
    if cfg.rope_scaling is not None:
        s = cfg.rope_scaling
        hf["rope_scaling"] = ({"rope_type": "linear", "factor": s.factor} if s.kind == "linear" else
                              {"rope_type": "llama3", "factor": s.factor, "low_freq_factor": s.low_freq_factor,
                               "high_freq_factor": s.high_freq_factor,
                               "original_max_position_embeddings": s.original_max_position})
    hf.update(extra or {})
    return hf
