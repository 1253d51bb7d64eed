"""vLLM's sampling extensions (repetition_penalty, min_p, min_tokens, stop_token_ids, ignore_eos): the logit
steps against transformers' own processors, and the engine against plain full-forward loops that apply them."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx
from transformers.generation.logits_process import MinPLogitsWarper, RepetitionPenaltyLogitsProcessor

from jaxwrite.infer import GenerationRequest, SamplingParams
from jaxwrite.infer.sampling import min_p_filter
from jaxwrite.infer.sampling_extensions import adjust_logits, build_extras
from test_infer_support import engine, model, tokenizer

PROMPT = "the writing model judge"


def test_repetition_penalty_and_min_tokens_match_transformers_processors():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 50)).astype(np.float32) * 4                       # [batch, vocab]
    prompts = [rng.integers(0, 50, 12).tolist() for _ in range(3)]
    penalties = [1.3, 0.7, 1.0]
    params = [SamplingParams(repetition_penalty=p, min_tokens=m, stop_token_ids=(7,)) for p, m in zip(penalties, (0, 5, 5))]
    built = build_extras(params, prompts, eos=[3], vocab=50, size=4)
    extras = jax.tree.map(lambda x: x[:3], built)
    got = np.asarray(adjust_logits(jnp.asarray(logits), extras, jnp.array([4, 4, 5])))
    for row, (p, prompt) in enumerate(zip(penalties, prompts)):
        want = RepetitionPenaltyLogitsProcessor(p)(torch.tensor([prompt]), torch.tensor(logits[row:row + 1]))[0]
        want = want.numpy()
        if row == 1:   # 4 of min_tokens 5 out: EOS and the stop id are held back
            want[[3, 7]] = -np.inf
        # transformers divides by a Python float, which torch does as a multiply by its reciprocal (1 ulp off)
        np.testing.assert_allclose(got[row], want, rtol=2.5e-7, atol=0)
    assert int(built.flags[3].sum()) == 0   # a padding row ends on nothing


def test_min_p_keeps_what_transformers_keeps():
    rng = np.random.default_rng(1)
    scaled = rng.normal(size=(4, 300)).astype(np.float32) * 3
    for min_p in (0.05, 0.3, 0.9):
        got = np.isfinite(np.asarray(min_p_filter(jnp.asarray(scaled), jnp.full(4, min_p, jnp.float32))))
        want = np.isfinite(MinPLogitsWarper(min_p)(None, torch.tensor(scaled)).numpy())
        assert (got == want).all() and 1 <= got.sum(-1).min() < 300


@pytest.fixture(scope="module")
def forward():
    """Logits of the last position by a full forward pass (no cache) over one fixed padded shape."""
    graphdef, state = nnx.split(model())
    run = jax.jit(lambda state, tokens, mask: nnx.merge(graphdef, state)(tokens, attention_mask=mask).logits)

    def last(ids):
        tokens = np.zeros((1, 64), np.int32)
        tokens[0, :len(ids)] = ids
        return np.asarray(run(state, tokens, np.arange(64)[None] < len(ids))[0, len(ids) - 1])
    return last


def _reference(forward, prompt, steps, penalty=1.0, held=(), min_tokens=0):
    """Greedy decoding with transformers' repetition penalty and `held` tokens at -inf for min_tokens steps."""
    ids = list(prompt)
    for step in range(steps):
        logits = torch.tensor(forward(ids))[None]
        if penalty != 1.0:
            logits = RepetitionPenaltyLogitsProcessor(penalty)(torch.tensor([ids]), logits)
        if step < min_tokens:
            logits[0, list(held)] = -float("inf")
        ids.append(int(logits[0].argmax()))
    return ids[len(prompt):]


def test_greedy_with_repetition_penalty_equals_the_reference(forward):
    prompt = tokenizer().encode(PROMPT)
    eng = engine(eos_ids=[])
    plain, penalised = eng.generate([GenerationRequest(prompt, SamplingParams(temperature=0, max_new_tokens=20)),
                                     GenerationRequest(prompt, SamplingParams(temperature=0, max_new_tokens=20,
                                                                              repetition_penalty=1.8))])
    assert plain[0].token_ids == _reference(forward, prompt, 20)
    assert penalised[0].token_ids == _reference(forward, prompt, 20, penalty=1.8)
    assert penalised[0].token_ids != plain[0].token_ids


def test_min_tokens_stop_token_ids_and_ignore_eos(forward):
    prompt = tokenizer().encode(PROMPT)
    free = _reference(forward, prompt, 12)
    eos = free[0]                      # EOS = the first token greedy picks: a plain run ends at once
    eng = engine(eos_ids=[eos])
    greedy = lambda **kw: GenerationRequest(prompt, SamplingParams(temperature=0, max_new_tokens=12, **kw))  # noqa: E731
    plain, held, ignored, stopped = eng.generate([greedy(), greedy(min_tokens=5), greedy(ignore_eos=True),
                                                  greedy(ignore_eos=True, stop_token_ids=(free[3],))])
    assert plain[0].token_ids == [] and plain[0].finish_reason == "stop"
    want = _reference(forward, prompt, 12, held=[eos], min_tokens=5)
    cut = want.index(eos) if eos in want[5:] else len(want)      # EOS may end it once 5 are out
    assert held[0].token_ids == want[:cut] and len(held[0].token_ids) >= 5
    assert ignored[0].token_ids == free and ignored[0].finish_reason == "length"   # EOS kept as a token
    assert stopped[0].token_ids == free[:free.index(free[3])] and stopped[0].finish_reason == "stop"


def test_min_tokens_holds_back_stop_strings():
    prompt = tokenizer().encode(PROMPT)
    eng = engine(eos_ids=[])
    full = eng.generate([GenerationRequest(prompt, SamplingParams(temperature=0, max_new_tokens=10))])[0][0]
    stop = tokenizer().decode(full.token_ids[:2]).strip()[:2]
    assert stop and stop in full.text
    early, late = eng.generate([GenerationRequest(prompt, SamplingParams(temperature=0, max_new_tokens=10, stop=(stop,))),
                                GenerationRequest(prompt, SamplingParams(temperature=0, max_new_tokens=10, stop=(stop,),
                                                                         min_tokens=10))])
    assert early[0].finish_reason == "stop" and len(early[0].token_ids) < 10
    assert late[0].text == full.text and late[0].finish_reason == "length"


def test_min_p_sampling_keeps_only_tokens_above_the_threshold(forward):
    """Every token sampled with min_p 0.85 had at least 0.85x the top token's probability (the random
    model's distribution is nearly flat, so that keeps a few percent of the vocabulary); without min_p the
    same seeds pick tokens below that (the control); min_p 1 is greedy."""
    prompt = tokenizer().encode(PROMPT)
    eng = engine(eos_ids=[])

    def ratios(out):
        ids, worst = list(prompt), 1.0
        for t in out.token_ids:
            logits = forward(ids)
            worst = min(worst, float(np.exp(logits[t] - logits.max())))
            ids.append(t)
        return worst

    sample = lambda seed, **kw: GenerationRequest(prompt, SamplingParams(temperature=1.0, max_new_tokens=12,  # noqa: E731
                                                                          seed=seed, **kw))
    outs = eng.generate([sample(s, min_p=0.85) for s in range(3)] + [sample(s) for s in range(3)]
                        + [sample(0, min_p=1.0), GenerationRequest(prompt, SamplingParams(temperature=0,
                                                                                          max_new_tokens=12))])
    assert min(ratios(o[0]) for o in outs[:3]) >= 0.85 - 1e-5
    assert min(ratios(o[0]) for o in outs[3:6]) < 0.85
    assert outs[6][0].token_ids == outs[7][0].token_ids
