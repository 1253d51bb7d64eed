"""Small shared helpers every package may use: registries, config files, jsonl I/O, errors."""
from jaxwrite.common.errors import InputError
from jaxwrite.common.registry import Registry
from jaxwrite.common.configfile import apply_overrides, load_config
from jaxwrite.common.jsonl import append_jsonl, read_jsonl, read_done_ids, write_jsonl

__all__ = [
    "InputError",
    "Registry",
    "apply_overrides",
    "load_config",
    "append_jsonl",
    "read_jsonl",
    "read_done_ids",
    "write_jsonl",
]
