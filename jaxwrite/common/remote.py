"""Cloud folders (gs://, s3://) for a run's small files and for command outputs, through `etils.epath`.

Orbax writes checkpoints to a bucket itself, but the rest of a run is written the way local files are:
appended line by line (metrics.jsonl, rollout samples, record-job outputs), rewritten in place
(TensorBoard events), read back on resume. Object stores cannot append, so a remote folder is mirrored:
the job writes into a local staging folder, `push` uploads the files that changed since the last push
(every logging step, every few records, and at the end), and `pull` brings them back first when a job
resumes on another machine. Checkpoint step folders are never mirrored: they live only in the bucket.

`StagedOutput` does this for a command's output (`generate`, the evaluators): a file and the files
named after it, or a whole report folder.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import signal
import threading
from typing import Callable, Iterable

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


def staging_dir(remote: str, tag: str = "") -> str:
    """The local folder that stands in for `remote` on this machine ($JAXWRITE_STAGING_DIR, else
    ~/.cache/jaxwrite/staging), one per remote path and `tag` (one per process of a multi-process job,
    which may share a machine)."""
    root = os.environ.get("JAXWRITE_STAGING_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "jaxwrite",
                                                                  "staging")
    digest = hashlib.sha256(remote.rstrip("/").encode()).hexdigest()[:16]
    return os.path.join(root, f"{os.path.basename(remote.rstrip('/')) or 'root'}-{digest}{'-' + tag if tag else ''}")


class MirroredDir:
    """A local folder (`local`) standing in for a remote one (`remote`).

    names: mirror only the top-level files whose name passes (an output and the files named after it,
    in a bucket folder it shares with others); subfolders are then left alone."""

    def __init__(self, remote: str, local: str | None = None, names: Callable[[str], bool] | None = None):
        self.remote = remote.rstrip("/")
        self.local = os.path.abspath(local or staging_dir(self.remote))
        self.names = names
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
                if _skipped(child.name) or (self.names is not None and not self.names(child.name)):
                    continue
                target = os.path.join(local, child.name)
                if child.is_dir():
                    if self.names is None:
                        os.makedirs(target, exist_ok=True)
                        pending.append((child, target))
                elif not os.path.exists(target):
                    with open(target, "wb") as f:
                        f.write(child.read_bytes())
                    self._mark(target)
                    copied += 1
        return copied

    def push(self, only: Iterable[str | None] | None = None) -> int:
        """Uploads the local files changed since the last push (`only`: of these local paths); returns how many."""
        chosen = None if only is None else {self._rel(p) for p in only if p is not None}
        uploaded = 0
        for folder, dirs, files in os.walk(self.local):
            dirs[:] = [d for d in dirs if not _skipped(d) and self.names is None]
            rel_folder = os.path.relpath(folder, self.local)
            for name in files:
                path = os.path.join(folder, name)
                rel = os.path.normpath(os.path.join(rel_folder, name))
                if (chosen is not None and rel not in chosen) or (self.names is not None and not self.names(name)):
                    continue
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

    def forget(self, path: str) -> None:
        """Drops the local copy of `path` (a local path), so the next `pull` fetches the remote's again."""
        if os.path.exists(path):
            os.remove(path)
        self._pushed.pop(self._rel(path), None)

    def delete(self, path: str) -> None:
        """Removes `path` (a local path) here and its remote copy."""
        self.forget(path)
        target = _epath(self.remote) / self._rel(path)
        if target.exists():
            target.unlink()

    def reset(self) -> None:
        """Empties the local folder: what the next `pull` brings is the remote's state, nothing older."""
        shutil.rmtree(self.local, ignore_errors=True)
        os.makedirs(self.local, exist_ok=True)
        self._pushed.clear()

    def _rel(self, path: str | os.PathLike) -> str:
        return os.path.relpath(os.path.abspath(path), self.local)

    def _mark(self, path: str) -> None:
        stat = os.stat(path)
        self._pushed[os.path.relpath(path, self.local)] = (stat.st_size, stat.st_mtime_ns)


def _family(name: str) -> Callable[[str], bool]:
    """The files named after output file `name`: itself, and `<stem>.*` (parts, failures, meta, seeds),
    where the stem drops the last suffix (out.jsonl -> out., out.jsonl.gz -> out.jsonl.)."""
    stem = name.rsplit(".", 1)[0] if "." in name.lstrip(".") else name
    return lambda other: other == name or other.startswith(stem + ".")


class StagedOutput:
    """A command's output at a path that may be remote: a file (with the files named after it: part files,
    failures, meta) or, with `folder=True`, a whole output folder.

        with StagedOutput(args.output, tag=shard.tag) as out:
            job = RecordJob(out.path, ..., mirror=out.mirror)   # or write report files under out.path

    A local path is used as it is (`mirror` None). A remote one is staged: entering empties this
    process's staging folder (one per process: `tag` names a process of a multi-process job, the process
    id the rest) and pulls what the bucket holds (the bucket is the truth: a resume on any machine starts
    from it), the job writes locally (a RecordJob pushes every few records), and leaving pushes what
    changed, after a failure too, then removes the staging folder; a SIGTERM (preemption) is turned into
    an exit that pushes. Records finished after the last push of a job killed outright (SIGKILL) are run
    again on resume. `pull=False`: an output that is only written (a report, an aggregate), whose bucket
    copy nothing reads, is not fetched first (a push adds and replaces files, it never deletes).
    """

    def __init__(self, path: str | os.PathLike, *, folder: bool = False, tag: str = "", pull: bool = True):
        self.target = os.fspath(path)
        self._pull = pull
        self.mirror: MirroredDir | None = None
        self.path = self.target
        self._previous = None
        if not is_remote(self.target):
            return
        remote = self.target.rstrip("/")
        tag = "-".join(t for t in (tag, f"pid{os.getpid()}") if t)
        if folder:
            self.mirror = MirroredDir(remote, staging_dir(remote, tag))
            self.path = self.mirror.local
        else:
            parent, name = remote.rsplit("/", 1)
            if "://" not in parent or not name:
                raise InputError("expected an output file inside a bucket (gs://BUCKET/FILE)", path=self.target)
            self.mirror = MirroredDir(parent, staging_dir(remote, tag), names=_family(name))
            self.path = os.path.join(self.mirror.local, name)

    def shown(self, local: str | os.PathLike) -> str:
        """A path under `path` as the user named it (in the bucket), for messages and results."""
        if self.mirror is None:
            return os.fspath(local)
        return f"{self.mirror.remote}/{os.path.relpath(os.path.abspath(local), self.mirror.local)}"

    def __enter__(self) -> "StagedOutput":
        if self.mirror is not None:
            self.mirror.reset()
            if self._pull:
                self.mirror.pull()
            if threading.current_thread() is threading.main_thread() and \
                    signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
                self._previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
        return self

    def __exit__(self, *exc) -> None:
        if self.mirror is not None:
            if self._previous is not None:
                signal.signal(signal.SIGTERM, self._previous)
                self._previous = None
            self.mirror.push()
            shutil.rmtree(self.mirror.local, ignore_errors=True)   # every file of it is in the bucket now


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)   # unwinds through StagedOutput.__exit__, which pushes
