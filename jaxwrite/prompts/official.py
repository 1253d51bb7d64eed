"""The official judge prompt templates, read from `official_prompts.json` (verbatim, with their source)."""
from __future__ import annotations

import functools
import json
import pathlib

_FILE = pathlib.Path(__file__).with_name("official_prompts.json")


@functools.cache
def _entries() -> dict[str, dict[str, str]]:
    with open(_FILE, encoding="utf-8") as f:
        return {k: v for k, v in json.load(f).items() if not k.startswith("_")}


def official_prompt(name: str) -> str:
    """The template text: writingbench_critic_system, writingbench_critic_user, longbench_write_judge."""
    entries = _entries()
    if name not in entries:
        raise KeyError(f"unknown official prompt '{name}'; expected one of: {', '.join(sorted(entries))}")
    return entries[name]["text"]


def official_prompt_source(name: str) -> dict[str, str]:
    """Where a template came from: repo, commit, path, licence."""
    official_prompt(name)  # same error for an unknown name
    return {k: v for k, v in _entries()[name].items() if k != "text"}


def official_prompt_version(*names: str) -> str:
    """The version of verbatim official templates: their names and the upstream repo@commit."""
    sources = sorted({f"{s['repo']}@{s['commit'][:12]}" for s in map(official_prompt_source, names)})
    return f"official {' + '.join(names)} ({', '.join(sources)}, verbatim)"
