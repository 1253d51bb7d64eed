"""Issue 14: the writing RM scores the whole answer (chunked past its context), and L_max of the length
reward comes from words per token measured per language on the policy tokenizer."""
import json
import math

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from data_pipelines.chat_sft import assistant_turn_ids
from jaxwrite.checkpoint import save_model_dir
from jaxwrite.models import RewardModel, get_preset
from jaxwrite.parallel import make_mesh
from jaxwrite.rl.config import RLConfig
from jaxwrite.rl.grpo import _rl_prompts
from jaxwrite.rl.length import SAMPLE_PROSE, measure_words_per_token, word_budget
from jaxwrite.rl.length_task import length_control_prompts
from jaxwrite.rl.prompts import load_rl_prompts
from jaxwrite.rl.rm_scorer import RewardModelScorer, pool_chunk_scores, resolve_rm_max_len, split_even
from jaxwrite.text import count_words
from test_infer_support import tokenizer, tokenizer_dir

RM_LEN = 64   # the RM's own context: short, so a few sentences overflow it
PROMPT = "a story about the river"
LONG_ANSWER = " ".join(["the river at night is a long story"] * 12 + ["good answer"])


@pytest.fixture(scope="module")
def rm(tmp_path_factory):
    """(in-memory RM, checkpoint path): a random tiny RM saved with the test tokenizer."""
    cfg = get_preset("tiny", vocab_size=tokenizer().vocab_size, max_seq_len=RM_LEN)
    model = RewardModel(cfg, nnx.Rngs(5))
    path = save_model_dir(tmp_path_factory.mktemp("rm") / "rm", model, cfg, tokenizer_dir=tokenizer_dir())
    return model, str(path)


def _direct(model, rows):
    """The RM's score of each row on its own (rows padded to RM_LEN, masked; one eager call)."""
    tokens = np.zeros((len(rows), RM_LEN), np.int32)
    for i, ids in enumerate(rows):
        tokens[i, :len(ids)] = ids
    mask = np.arange(RM_LEN)[None, :] < np.array([len(ids) for ids in rows])[:, None]
    return [float(s) for s in model(jnp.asarray(tokens), attention_mask=jnp.asarray(mask))]


def test_split_even_and_pooling():
    pieces = split_even(list(range(10)), 4)
    assert [len(p) for p in pieces] == [3, 3, 4] and sum(pieces, []) == list(range(10))
    assert split_even([], 4) == [[]] and split_even([1, 2], 4) == [[1, 2]]
    assert pool_chunk_scores([1.0, 4.0], [1, 3]) == pytest.approx(3.25)
    assert resolve_rm_max_len(0, 2048) == 2048 and resolve_rm_max_len(512, 2048) == 512
    assert resolve_rm_max_len(8192, 2048) == 2048


def test_rm_scores_whole_answer_as_weighted_mean_of_chunks(rm):
    model, path = rm
    scorer = RewardModelScorer(path, make_mesh((1, -1, 1)), batch_size=8)
    assert scorer.max_len == RM_LEN                       # rm_max_len 0: the RM's own context
    tok = scorer.tokenizer
    prompt_ids, turn_ids, trained = assistant_turn_ids(tok, [{"role": "user", "content": PROMPT}], LONG_ANSWER)
    body, end = turn_ids[:trained - 1], turn_ids[trained - 1]
    room = RM_LEN - len(prompt_ids) - 1
    assert len(body) > 2 * room                           # the answer needs at least three chunks
    # Chunks built here by hand: consecutive answer tokens, each rendered prompt + chunk + end-of-turn.
    count = math.ceil(len(body) / room)
    bounds = [i * len(body) // count for i in range(count + 1)]
    chunks = [body[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    assert sum(chunks, []) == body and max(map(len, chunks)) <= room
    short = "good story"
    p_short, t_short, n_short = assistant_turn_ids(tok, [{"role": "user", "content": PROMPT}], short)
    *chunk_scores, truncated, direct_short = _direct(
        model, [prompt_ids + c + [end] for c in chunks]
        + [prompt_ids + body[:room] + [end], p_short + t_short[:n_short]])   # truncated: what a prefix-only scorer saw
    expected = sum(len(c) * s for c, s in zip(chunks, chunk_scores)) / len(body)

    long_score, short_score = scorer([(PROMPT, LONG_ANSWER), (PROMPT, short)])
    assert long_score == pytest.approx(expected, abs=1e-4)
    assert abs(long_score - truncated) > 1e-3
    assert short_score == pytest.approx(direct_short, abs=1e-4)   # fits: one row, the RM's plain score


def test_rm_max_len_caps_the_rms_own(rm):
    _, path = rm
    scorer = RewardModelScorer(path, make_mesh((1, -1, 1)), max_len=48, batch_size=8)
    assert scorer.max_len == 48
    rows = scorer.chunk_rows(PROMPT, LONG_ANSWER)
    assert len(rows) > 1 and all(len(ids) <= 48 for ids, _ in rows)


def test_words_per_token_measured_per_language():
    tok = tokenizer()
    ratios = measure_words_per_token(tok)
    for lang, texts in SAMPLE_PROSE.items():
        words = sum(count_words(t) for t in texts)
        assert ratios[lang] == pytest.approx(words / sum(len(tok.encode(t)) for t in texts))
    assert ratios["en"] != pytest.approx(ratios["zh"], rel=0.05)

    budget = word_budget(tok, 96)
    prompts = length_control_prompts(16, 20, 60, budget, seed=0, zh_fraction=0.5)
    by_lang = {("zh" if "字" in p.text else "en"): p.max_len for p in prompts}
    assert by_lang == {"en": math.floor(96 * ratios["en"]), "zh": math.floor(96 * ratios["zh"])}
    assert by_lang["en"] != by_lang["zh"]
    # A number is an override for every language; a fixed rl.lang picks one language's figure.
    assert {p.max_len for p in length_control_prompts(8, 20, 60, word_budget(tok, 96, 0.7), zh_fraction=0.5)} == {67}
    assert word_budget(tok, 96, lang="zh")("Write about the sea.") == by_lang["zh"]
    with pytest.raises(ValueError, match="words_per_token"):
        word_budget(tok, 96, -1.0)


def test_prompt_file_and_grpo_prompts_get_per_language_budgets(tmp_path):
    tok = tokenizer()
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in [
        {"id": "en", "prompt": "Write about the sea in 50 words."},
        {"id": "zh", "prompt": "请写一篇关于大海的短文，50字左右。"}]) + "\n")
    budget = word_budget(tok, 200)
    loaded = {p.id: p.max_len for p in load_rl_prompts(path, max_len=budget).prompts}
    assert loaded == {"en": budget.for_lang("en"), "zh": budget.for_lang("zh")}

    rl = RLConfig()
    assert rl.words_per_token == 0 and rl.rm_max_len == 0
    rl = rl.replace(max_new_tokens=200, prompts=str(path))
    assert {p.id: p.max_len for p in _rl_prompts(rl, 0, tok)} == loaded
    assert {p.max_len for p in _rl_prompts(rl.replace(words_per_token=0.7), 0, tok)} == {140}


def test_range_style_length_prompts_and_held_out_topics():
    """LongWriter-style "A to B words" requests parse to exactly [A, B]; held-out prompts share no topic
    with the training set, and the "about" wording (the tiny recipe's) is unchanged by the new style."""
    about = length_control_prompts(6, 20, 60, 96, seed=3)
    ranged = length_control_prompts(6, 20, 60, 96, seed=3, style="range")
    for a, r in zip(about, ranged):
        target = int(a.text.split("about ")[-1].split()[0])
        lo, hi = (int(w) for w in r.text.removesuffix(" words.").split(" in ")[-1].split(" to "))
        assert lo <= target <= hi and lo % 5 == 0 and hi % 5 == 0 and (r.lower, r.upper) == (lo, hi)
        assert hi - lo >= 0.4 * target   # wider than the ±10 % "about" window
    zh = length_control_prompts(4, 20, 60, 96, seed=3, style="range", zh_fraction=1.0)
    assert all("到" in p.text and p.lower < p.upper for p in zh)

    def topic(p):
        return p.text.split(" about ")[1].split(" in ")[0]

    held = length_control_prompts(8, 20, 60, 96, seed=3, style="range", held_out=True)
    assert [p.id for p in held] == [f"heldout-{i}" for i in range(8)]
    assert not {topic(p) for p in held} & {topic(p) for p in length_control_prompts(24, 20, 60, 96)}
    with pytest.raises(ValueError, match="style 'wide'"):
        length_control_prompts(2, 20, 60, 96, style="wide")
