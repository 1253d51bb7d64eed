"""LM pipeline: packing invariants, exact resume from iterator state, sharding, mixtures, long documents."""
import numpy as np
import pytest

from data_pipelines import LMPipelineConfig, lm_config, make_lm_pipeline
from jaxwrite.common import InputError


class CharTokenizer:
    """One id per character; 1 = EOS. Enough to test the pipeline without a trained vocabulary."""
    eos_ids, bos_id, pad_id = (1,), 2, 0

    def encode(self, text, add_special_tokens=False):
        return [3 + ord(c) % 1000 for c in text]


def _jsonl(tmp_path, name, texts):
    path = tmp_path / name
    path.write_text("".join(f'{{"text": "{t}"}}\n' for t in texts), encoding="utf-8")
    return str(path)


def _config(sources, seq_len=16, batch_size=2, seed=0, num_epochs=None):
    return LMPipelineConfig(seq_len=seq_len, batch_size=batch_size, seed=seed, num_epochs=num_epochs,
                            num_packing_bins=2, sources=sources)


def test_rows_are_packed_with_segments_positions_and_in_document_targets(tmp_path):
    texts = ["ab", "cdefg", "hij", "klmnopqrstuvwxyzABCDEFGHIJ", "K"]
    cfg = _config({"a": {"kind": "jsonl", "path": _jsonl(tmp_path, "a.jsonl", texts), "weight": 1.0}},
                  num_epochs=1, batch_size=1)
    batches = list(make_lm_pipeline(cfg, CharTokenizer()))
    seen = []
    for b in batches:
        assert set(b) == {"tokens", "targets", "loss_mask", "segment_ids", "positions"}
        assert all(v.shape == (1, 16) and v.dtype == np.int32 for v in b.values())
        seg, pos, tok, tgt, mask = (b[k][0] for k in ("segment_ids", "positions", "tokens", "targets", "loss_mask"))
        assert (mask[seg == 0] == 0).all()
        for s in range(1, seg.max() + 1):
            idx = np.flatnonzero(seg == s)
            assert (pos[idx] == np.arange(len(idx))).all()
            # inside a segment each target is the next input: no target crosses documents
            assert (tgt[idx[:-1]] == tok[idx[1:]]).all()
            seen.append(np.append(tok[idx], tgt[idx[-1]]))
    # Every document's text + EOS is present, the 27-token one split across rows and nothing truncated.
    total_tokens = sum(int((b["segment_ids"] > 0).sum()) for b in batches)
    assert total_tokens == sum(len(t) for t in texts)
    assert max(len(s) for s in seen) <= 17


def test_exact_resume_from_state(data_dir):
    cfg = lm_config(str(data_dir), seq_len=32, batch_size=2, max_chars=400)
    tok = CharTokenizer()
    it = make_lm_pipeline(cfg, tok)
    for _ in range(3):
        next(it)
    state = it.get_state()
    expected = [next(it) for _ in range(4)]
    fresh = make_lm_pipeline(cfg, tok)
    fresh.set_state(state)
    for want in expected:
        got = next(fresh)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])


def test_same_seed_same_stream_other_seed_differs(tmp_path):
    path = _jsonl(tmp_path, "a.jsonl", [f"doc number {i}" for i in range(40)])
    src = {"a": {"kind": "jsonl", "path": path, "weight": 1.0}}
    first = [next(make_lm_pipeline(_config(src, seed=s), CharTokenizer()))["tokens"] for s in (3, 3, 4)]
    np.testing.assert_array_equal(first[0], first[1])
    assert not np.array_equal(first[0], first[2])


def test_process_shards_are_disjoint(tmp_path):
    texts = [f"d{i:02d}" for i in range(12)]
    src = {"a": {"kind": "jsonl", "path": _jsonl(tmp_path, "a.jsonl", texts), "weight": 1.0}}
    cfg = _config(src, seq_len=4, batch_size=1, num_epochs=1)
    per_host = []
    for rank in range(3):
        docs = set()
        for b in make_lm_pipeline(cfg, CharTokenizer(), process_index=rank, process_count=3):
            docs.update("".join(chr(t - 3) for t in row[:3]) for row in b["tokens"] if row[0] != 0)
        per_host.append(docs)
    assert all(len(d) == 4 for d in per_host)
    assert set.union(*per_host) == set(texts) and sum(map(len, per_host)) == 12


def test_mixture_follows_weights(tmp_path):
    a = _jsonl(tmp_path, "a.jsonl", ["aaaa"] * 50)
    b = _jsonl(tmp_path, "b.jsonl", ["bbbb"] * 50)
    cfg = _config({"a": {"kind": "jsonl", "path": a, "weight": 0.75},
                   "b": {"kind": "jsonl", "path": b, "weight": 0.25}}, seq_len=5, batch_size=4)
    it = make_lm_pipeline(cfg, CharTokenizer())
    firsts = np.concatenate([next(it)["tokens"][:, 0] for _ in range(25)])
    share_a = float(np.mean(firsts == 3 + ord("a")))
    assert 0.65 < share_a < 0.85


def test_long_document_errors_when_configured(tmp_path):
    src = {"a": {"kind": "jsonl", "path": _jsonl(tmp_path, "a.jsonl", ["x" * 40]), "weight": 1.0}}
    cfg = _config(src, num_epochs=1).replace(on_long="error")
    with pytest.raises(InputError, match="exceeds seq_len 16"):
        next(make_lm_pipeline(cfg, CharTokenizer()))


def test_longwriter_zero_config_names_missing_sources(data_dir):
    cfg = lm_config(str(data_dir))
    assert set(cfg.sources) == {"zh_fiction", "en_long_form"}
    assert cfg.sources["zh_fiction"].weight == pytest.approx(4 / 7)
    assert dict(cfg.unavailable_sources) == {"zh_non_fiction": 0.15, "online_information": 0.08,
                                             "finance": 0.05, "essays": 0.01, "long_cot": 0.01}


def test_a_bad_source_is_refused_naming_it(tmp_path):
    path = _jsonl(tmp_path, "a.jsonl", ["x"])
    with pytest.raises(InputError, match=r"field 'sources\.a\.weight': expected a number > 0, got 0\.0"):
        _config({"a": {"kind": "jsonl", "path": path, "weight": 0}})
    with pytest.raises(InputError, match=r"field 'sources\.a\.kind': unknown value 'json' \(did you mean 'jsonl'"):
        _config({"a": {"kind": "json", "path": path}})
