"""gs:// workdirs, against a local fake bucket registered with fsspec (what etils.epath reads gs:// through):
a run's metrics, run files, TensorBoard events, model config and tokenizer copy reach the bucket; a resume
on another machine (another staging folder) pulls them back and continues without duplicating a step."""
import json
import os

from fake_bucket import FakeBucket, bucket  # noqa: F401 - the fixture
from jaxwrite.common.remote import MirroredDir, is_remote
from train_fixtures import REPO, tiny_overrides, train_tokenizer, write_corpus


def test_remote_paths_are_told_apart():
    assert is_remote("gs://b/run") and is_remote("s3://b/x")
    assert not is_remote("/tmp/run") and not is_remote("run") and not is_remote("file:///tmp/run")


def test_mirror_pushes_changes_and_pulls_elsewhere(bucket, tmp_path):
    local = tmp_path / "a"
    mirror = MirroredDir("gs://bkt/run", str(local))
    (local / "checkpoints" / "7").mkdir(parents=True)          # a step folder: Orbax's, never mirrored
    (local / "checkpoints" / "7" / "x").write_text("arrays")
    (local / "checkpoints" / "model_config.json").write_text("{}")
    (local / "metrics.jsonl").write_text('{"step": 1}\n')
    assert mirror.push() == 2 and mirror.push() == 0           # nothing changed: nothing uploaded
    assert (bucket / "bkt" / "run" / "metrics.jsonl").read_text() == '{"step": 1}\n'
    assert not (bucket / "bkt" / "run" / "checkpoints" / "7").exists()
    with open(local / "metrics.jsonl", "a") as f:
        f.write('{"step": 2}\n')
    assert mirror.push() == 1
    other = MirroredDir("gs://bkt/run", str(tmp_path / "b"))
    assert other.pull() == 2
    assert (tmp_path / "b" / "metrics.jsonl").read_text().splitlines() == ['{"step": 1}', '{"step": 2}']


def test_training_in_a_bucket_resumes_on_another_machine(bucket, tmp_path, monkeypatch):
    import jaxwrite.train.trainer as trainer_module
    from jaxwrite.checkpoint import Checkpointer
    from jaxwrite.common import load_config
    from jaxwrite.train import train

    # Orbax writes gs:// itself (tensorstore's GCS driver), which no local fake reaches: its checkpoints go
    # to the fake bucket's folder, so the test covers what jaxwrite writes, through the mirror.
    seen = []

    def local_checkpointer(directory, **kwargs):
        seen.append(directory)
        return Checkpointer(os.path.join(FakeBucket.root, directory.removeprefix("gs://")), **kwargs)

    monkeypatch.setattr(trainer_module, "Checkpointer", local_checkpointer)
    data = write_corpus(tmp_path / "data", books=3, paragraphs=40)
    tok = train_tokenizer(data, tmp_path / "tok")

    def config(steps):
        return load_config(str(REPO / "configs" / "cpt_tiny.py"),
                           tiny_overrides(data, tok, num_steps=steps, log_every=1, checkpoint_every=2, eval_every=0))

    assert train(config(2), "gs://bkt/runs/cpt") == 0
    assert seen == ["gs://bkt/runs/cpt/checkpoints"]
    run = bucket / "bkt" / "runs" / "cpt"
    assert [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    assert (run / "run_config.json").exists() and (run / "data_info.json").exists()
    assert (run / "checkpoints" / "model_config.json").exists() and (run / "checkpoints" / "tokenizer").is_dir()
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))

    monkeypatch.setenv("JAXWRITE_STAGING_DIR", str(tmp_path / "staging-b"))   # another machine
    assert train(config(3), "gs://bkt/runs/cpt") == 0
    assert [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3]
