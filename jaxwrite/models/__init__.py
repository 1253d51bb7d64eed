"""One decoder-only Transformer family (Qwen2/2.5, Qwen3, Llama-3), presets, Hugging Face and GGUF interop."""
from jaxwrite.models.attention import KVCache
from jaxwrite.models.config import ModelConfig, Remat, RopeScaling
from jaxwrite.models.presets import PRESETS, get_preset
from jaxwrite.models.transformer import RewardModel, Transformer
from jaxwrite.models.hf_config import config_from_hf, config_to_hf
from jaxwrite.models.hf_io import load_hf, save_hf
from jaxwrite.models.gguf_config import config_from_gguf
from jaxwrite.models.gguf_io import load_gguf

__all__ = ["KVCache", "ModelConfig", "Remat", "RopeScaling", "PRESETS", "get_preset", "RewardModel", "Transformer",
           "config_from_hf", "config_to_hf", "load_hf", "save_hf", "config_from_gguf", "load_gguf"]
