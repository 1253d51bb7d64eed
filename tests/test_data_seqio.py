"""seqio tasks (optional extra): registered names and mixture weights; skips when seqio is absent."""
import pytest

seqio = pytest.importorskip("seqio")


def test_register_tasks_and_mixture(data_dir, tmp_path):
    from data_pipelines.seqio_tasks import MIXTURE_NAME, register_tasks
    import sentencepiece as spm
    sample = tmp_path / "sample.txt"
    sample.write_text((data_dir / "corpus_en" / "pg11.txt").read_text(encoding="utf-8")[:200_000], encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(sample), model_prefix=str(tmp_path / "sp"), vocab_size=300)
    tasks = register_tasks(str(data_dir), str(tmp_path / "sp.model"))
    assert tasks == ["jaxwrite_zh_fiction", "jaxwrite_en_long_form"]
    mixture = seqio.get_mixture_or_task(MIXTURE_NAME)
    assert [t.name for t in mixture.tasks] == tasks
