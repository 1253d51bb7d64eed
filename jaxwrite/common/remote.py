"""Cloud folders (gs://, s3://) for a run's small files, through `etils.epath`.

Orbax writes checkpoints to a bucket itself, but the rest of a run is written the way local files are:
appended line by line (metrics.jsonl, rollout samples), rewritten in place (TensorBoard events), read back
on resume. Object stores cannot append, so a remote workdir is mirrored: the run writes into a local
staging folder, `push` uploads the files that changed since the last push (every logging step and at the
end), and `pull` brings them back first when a run resumes on another machine. Checkpoint step folders
are never mirrored: they live only in the bucket.
"""
from __future__ import annotations

import hashlib
import os

from jaxwrite.common.errors import InputError

# Written straight to the bucket by Orbax: step folders (digits) and its temporary folders.
_ORBAX_TMP = ".orbax-checkpoint-tmp"


def is_remote(path: str | os.PathLike) -> bool:
    """True for a URL path (gs://bucket/x, s3://...), False for a local path or file://."""
    text = os.fspath(path)
    return "://" in text and not text.startswith("file://")


def _epath(path: str):
    try:
        from etils import epath
    except ImportError:   # pragma: no cover - etils is a declared dependency
        raise InputError("cloud paths need etils: pip install 'etils[epath]'", path=path) from None
    return epath.Path(path)


def _skipped(name: str) -> bool:
    return name.isdigit() or _ORBAX_TMP in name


def staging_dir(remote: str) -> str:
    """The local folder that stands in for `remote` on this machine ($JAXWRITE_STAGING_DIR, else
    ~/.cache/jaxwrite/staging), one per remote path."""
    root = os.environ.get("JAXWRITE_STAGING_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "jaxwrite",
                                                                  "staging")
    digest = hashlib.sha256(remote.rstrip("/").encode()).hexdigest()[:16]
    return os.path.join(root, f"{os.path.basename(remote.rstrip('/')) or 'root'}-{digest}")


class MirroredDir:
    """A local folder (`local`) standing in for a remote one (`remote`)."""

    def __init__(self, remote: str, local: str | None = None):
        self.remote = remote.rstrip("/")
        self.local = local or staging_dir(self.remote)
        self._pushed: dict[str, tuple[int, int]] = {}   # relative path -> (size, mtime_ns) last uploaded
        os.makedirs(self.local, exist_ok=True)

    def pull(self) -> int:
        """Copies the remote files this machine lacks (a resume elsewhere); returns how many."""
        root = _epath(self.remote)
        if not root.exists():
            return 0
        copied = 0
        pending = [(root, self.local)]
        while pending:
            folder, local = pending.pop()
            for child in folder.iterdir():
                if _skipped(child.name):
                    continue
                target = os.path.join(local, child.name)
                if child.is_dir():
                    os.makedirs(target, exist_ok=True)
                    pending.append((child, target))
                elif not os.path.exists(target):
                    with open(target, "wb") as f:
                        f.write(child.read_bytes())
                    self._mark(target)
                    copied += 1
        return copied

    def push(self) -> int:
        """Uploads the local files changed since the last push; returns how many."""
        uploaded = 0
        for folder, dirs, files in os.walk(self.local):
            dirs[:] = [d for d in dirs if not _skipped(d)]
            rel_folder = os.path.relpath(folder, self.local)
            for name in files:
                path = os.path.join(folder, name)
                rel = os.path.normpath(os.path.join(rel_folder, name))
                stat = os.stat(path)
                if self._pushed.get(rel) == (stat.st_size, stat.st_mtime_ns):
                    continue
                target = _epath(self.remote) / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(path, "rb") as f:
                    target.write_bytes(f.read())
                self._pushed[rel] = (stat.st_size, stat.st_mtime_ns)
                uploaded += 1
        return uploaded

    def _mark(self, path: str) -> None:
        stat = os.stat(path)
        self._pushed[os.path.relpath(path, self.local)] = (stat.st_size, stat.st_mtime_ns)
