"""A local fake bucket for gs:// paths: an fsspec file system registered for gs:// and gcs:// (what
etils.epath reads them through), storing gs://BUCKET/PATH under a folder. Use the `bucket` fixture."""
import os

import pytest
from fsspec.implementations.local import LocalFileSystem


class FakeBucket(LocalFileSystem):
    """gs://BUCKET/PATH stored under `root`/BUCKET/PATH."""
    protocol = ("gs", "gcs")
    root = ""

    def __init__(self, *args, finalize_on_close=False, **kwargs):
        super().__init__(*args, **kwargs)

    @classmethod
    def _strip_protocol(cls, path):
        path = os.fspath(path)
        for prefix in ("gs://", "gcs://"):
            if path.startswith(prefix):
                path = os.path.join(cls.root, path[len(prefix):])
        return super()._strip_protocol(path)


@pytest.fixture()
def bucket(tmp_path, monkeypatch):
    """The fake bucket's folder (gs://b/x is bucket/"b"/"x"); staging goes to tmp_path/staging-a."""
    import fsspec
    from etils.epath import backend
    monkeypatch.setattr(FakeBucket, "root", str(tmp_path / "bucket"))
    (tmp_path / "bucket").mkdir()
    for name in ("gs", "gcs"):
        fsspec.register_implementation(name, FakeBucket, clobber=True)
    backend.fsspec_backend._get_filesystem.cache_clear()
    monkeypatch.setenv("JAXWRITE_STAGING_DIR", str(tmp_path / "staging-a"))
    yield tmp_path / "bucket"
    backend.fsspec_backend._get_filesystem.cache_clear()
