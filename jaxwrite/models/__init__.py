"""One decoder-only Transformer family (Qwen2/2.5, Qwen3, Llama-3), presets, Hugging Face and GGUF interop.

Every einsum and shape comment in this package names axes in one alphabet (gemma's):

    B batch    T query positions    S key positions (cache slots)    D model width
    N query heads    K key/value heads    G query heads per key/value head (N = K G)    H head dim
    F MLP width    V vocabulary    L layers

Keys and values have one layout wherever they travel, [B, K, S, H] (heads before positions: each
head's keys are one contiguous [S, H] matrix, the batched-matmul layout attention reads); the KV cache
stacks it per layer, [L, B, K, S, H]. Queries stay [B, T, N, H], grouped as [B, T, K, G, H].
"""
from jaxwrite.models.kv_cache import KVCache
from jaxwrite.models.config import ModelConfig, Remat, RopeScaling
from jaxwrite.models.presets import PRESETS, get_preset
from jaxwrite.models.transformer import RewardModel, Transformer, TransformerOutput
from jaxwrite.models.hf_config import config_from_hf, config_to_hf
from jaxwrite.models.hf_io import load_hf, save_hf
from jaxwrite.models.gguf_config import config_from_gguf
from jaxwrite.models.gguf_io import load_gguf
from jaxwrite.models.lora import LoRASpec, add_lora, merge_lora, trainable

__all__ = ["KVCache", "ModelConfig", "Remat", "RopeScaling", "PRESETS", "get_preset", "RewardModel", "Transformer",
           "TransformerOutput", "config_from_hf", "config_to_hf", "load_hf", "save_hf",
           "config_from_gguf", "load_gguf", "LoRASpec", "add_lora", "merge_lora", "trainable"]
