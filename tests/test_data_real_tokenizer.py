"""The data pipelines with a real jaxwrite.text tokenizer (tiny SentencePiece trained on a corpus slice)."""
import json

import pytest

from data_pipelines import chat_example, lm_config, make_lm_pipeline

text = pytest.importorskip("jaxwrite.text")


@pytest.fixture(scope="module")
def tokenizer(data_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("sp")
    sample = root / "sample.txt"
    sample.write_text((data_dir / "corpus_en" / "pg11.txt").read_text(encoding="utf-8-sig")[:60_000]
                      + (data_dir / "corpus_zh" / "pg27166.txt").read_text(encoding="utf-8")[:4_000],
                      encoding="utf-8")
    return text.train_sentencepiece([str(sample)], str(root / "tok"), vocab_size=1200, character_coverage=0.98)


def test_critic_verdict_mask_with_real_tokenizer(tokenizer):
    verdict = json.dumps({"score": 9, "reason": "Vivid 描写"}, ensure_ascii=False)
    ex = chat_example(tokenizer, [{"role": "user", "content": "Judge this."}], verdict)
    trained = ex["targets"][ex["loss_mask"] == 1].tolist()
    assert trained[-1] in tokenizer.eos_ids
    assert tokenizer.decode(trained[:-1]) == verdict


def test_lm_pipeline_with_real_tokenizer(data_dir, tokenizer):
    cfg = lm_config(str(data_dir), seq_len=64, batch_size=2, max_chars=500)
    batch = next(make_lm_pipeline(cfg, tokenizer))
    assert batch["tokens"].shape == (2, 64) and (batch["segment_ids"] > 0).any()
