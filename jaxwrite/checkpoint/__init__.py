"""Orbax checkpoints: resumable training state, and model dirs other commands load."""
from jaxwrite.checkpoint.manager import Checkpointer, RestoredRun
from jaxwrite.checkpoint.model_dir import (load_model_from_checkpoint, read_model_config, save_model_dir,
                                           tokenizer_dir_of, write_model_config, copy_tokenizer)
from jaxwrite.checkpoint.pretrained import (load_pretrained, pretrained_config, pretrained_tokenizer_path,
                                            resolve_source)

__all__ = ["Checkpointer", "RestoredRun", "load_model_from_checkpoint", "read_model_config", "save_model_dir",
           "tokenizer_dir_of", "write_model_config", "copy_tokenizer", "load_pretrained", "pretrained_config",
           "pretrained_tokenizer_path", "resolve_source"]
