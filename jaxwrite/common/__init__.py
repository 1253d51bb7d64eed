"""Small shared helpers every package may use: registries, config files, jsonl I/O, the resumable
record job, errors."""
from jaxwrite.common.errors import InputError
from jaxwrite.common.data_dir import DATA_DIR_ENV, benchmark_dir, download_dir, find_data_dir, sample_dir
from jaxwrite.common.registry import Registry
from jaxwrite.common.configfile import RECIPES_PACKAGE, apply_overrides, load_config, recipe_names, recipes_dir
from jaxwrite.common.jsonl import append_jsonl, json_line, read_done_ids, read_jsonl, scan_jsonl, write_jsonl
from jaxwrite.common.record_input import InputLines, read_input
from jaxwrite.common.record_job import RecordJob
from jaxwrite.common.platform import building_for, target_backend

__all__ = [
    "InputError",
    "DATA_DIR_ENV",
    "download_dir",
    "find_data_dir",
    "benchmark_dir",
    "sample_dir",
    "Registry",
    "apply_overrides",
    "load_config",
    "RECIPES_PACKAGE",
    "recipe_names",
    "recipes_dir",
    "append_jsonl",
    "json_line",
    "read_jsonl",
    "scan_jsonl",
    "read_done_ids",
    "write_jsonl",
    "RecordJob",
    "InputLines",
    "read_input",
    "building_for",
    "target_backend",
]
