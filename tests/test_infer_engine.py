"""Engine: greedy equals full-forward argmax, ragged batches, seeds, stops, finish reasons, group sampling,
cache growth and batch compaction, sharding, per-request errors, the sampler."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxwrite.infer import Engine, GenerationRequest, SamplingParams
from jaxwrite.infer.sampling import sample_keys, sample_tokens
from jaxwrite.parallel import make_mesh
from test_infer_support import engine, model, tokenizer

PROMPTS = ["the writing model judge", "a story", "night city river plan answer think good"]


def _greedy(max_new=12, **kw):
    return SamplingParams(temperature=0.0, max_new_tokens=max_new, **kw)


@pytest.fixture(scope="module")
def eng():
    return engine()


@pytest.fixture(scope="module")
def reference():
    """Greedy continuations by repeated full forward passes (no cache), one fixed padded shape."""
    graphdef, state = nnx.split(model())

    @jax.jit
    def forward(state, tokens, mask):
        return nnx.merge(graphdef, state)(tokens, attention_mask=mask).logits

    def run(prompt_ids, steps):
        ids = list(prompt_ids)
        for _ in range(steps):
            tokens = np.zeros((1, 64), np.int32)
            tokens[0, :len(ids)] = ids
            mask = np.arange(64)[None] < len(ids)
            logits = forward(state, tokens, mask)
            ids.append(int(jnp.argmax(logits[0, len(ids) - 1])))
        return ids[len(prompt_ids):]
    return run


def test_greedy_equals_full_forward_argmax_through_cache_growth(eng, reference):
    prompt = tokenizer().encode(PROMPTS[0])
    # 40 new tokens: the cache starts at 32 slots and must grow (chunk_steps=8) on the way.
    out = eng.generate([GenerationRequest(prompt, _greedy(40))])[0][0]
    assert out.token_ids == reference(prompt, 40)
    assert out.finish_reason == "length" and len(out.token_ids) == 40
    assert out.text == tokenizer().decode(out.token_ids)


def test_layer_scan_and_unrolled_layers_generate_the_same(eng, reference):
    """The two decode layouts (stacked weights + layer scan; per-layer weights and caches, the CPU
    default) give the same greedy tokens through cache growth and the same seeded samples."""
    scan = engine(unroll_layers=False)
    assert eng.unroll_layers and not scan.unroll_layers
    prompt = tokenizer().encode(PROMPTS[0])
    assert scan.generate([GenerationRequest(prompt, _greedy(40))])[0][0].token_ids == reference(prompt, 40)
    sampled = [GenerationRequest(tokenizer().encode(p), SamplingParams(temperature=1.0, top_p=0.9, seed=3,
                                                                      max_new_tokens=12, n=2)) for p in PROMPTS]
    got = [[c.token_ids for c in r] for r in scan.generate(sampled)]
    assert got == [[c.token_ids for c in r] for r in eng.generate(sampled)]


def test_cache_sized_prefill_plan_and_results(eng):
    """Cache-sized prefill splits long prompts into equal power-of-two chunks within the row and score
    budgets and prefills a long prompt apart from the others (longest first, short ones together, the
    groups' rows written into one batch cache), and gives the same next-token logits and greedy text as
    all rows in 512-token chunks."""
    from jaxwrite.infer import prefill_plan
    small = engine(cache_sized_prefill=True)
    plan = small._prefill_plan(batch=8, longest=300)
    chunk = prefill_plan.PREFILL_ROWS // 8
    assert plan == [(s, chunk) for s in range(0, 300, chunk)]
    block = max(chunk, small.cfg.attention_block)
    assert 8 * small.cfg.num_heads * chunk * block <= prefill_plan.PREFILL_SCORES
    assert engine(cache_sized_prefill=False)._prefill_plan(8, 300) == [(0, 512)]

    rng = np.random.default_rng(0)
    vocab = tokenizer().vocab_size
    prompts = [list(map(int, rng.integers(3, vocab, n))) for n in (300, 41, 170, 30, 20)]
    one_chunk = engine(cache_sized_prefill=False)
    # 3 short rows padded to 4 in their group (the padding row is dropped), 5 rows to a batch of 8
    assert small._prefill_groups(prompts) == [[0], [2], [1, 3, 4]]
    assert one_chunk._prefill_groups(prompts) == [[0, 1, 2, 3, 4]]
    # equal rows whose one batch pads nothing stay together (apart, each would pad 448 tokens to 512)
    assert small._prefill_groups([[5] * 448] * 8) == [list(range(8))]
    np.testing.assert_allclose(small.last_logits(prompts, tail=2), one_chunk.last_logits(prompts, tail=2),
                               rtol=2e-4, atol=2e-4)
    requests = [GenerationRequest(p, _greedy(6)) for p in prompts]
    assert ([c[0].token_ids for c in small.generate(requests)]
            == [c[0].token_ids for c in one_chunk.generate(requests)])


def test_ragged_batch_equals_unbatched(eng):
    tok = tokenizer()
    requests = [GenerationRequest(tok.encode(p), _greedy(10)) for p in PROMPTS]
    batched = [r[0].token_ids for r in eng.generate(requests)]
    alone = [eng.generate([r])[0][0].token_ids for r in requests]
    assert batched == alone


def test_same_seed_same_text_regardless_of_batch_position(eng):
    tok = tokenizer()
    params = SamplingParams(temperature=3.0, top_p=0.95, top_k=50, max_new_tokens=12, seed=1234)
    target = GenerationRequest(tok.encode(PROMPTS[1]), params)
    others = [GenerationRequest(tok.encode(p), SamplingParams(temperature=2.0, max_new_tokens=5, seed=i))
              for i, p in enumerate(PROMPTS)]
    alone = eng.generate([target])[0][0].token_ids
    mixed = eng.generate([others[0], others[1], target, others[2]])[2][0].token_ids
    assert alone == mixed
    other_seed = eng.generate([GenerationRequest(target.prompt_ids,
                                                 SamplingParams(**{**params.__dict__, "seed": 99}))])[0][0]
    assert other_seed.token_ids != alone   # at temperature 3 a different seed changes the text


def test_stop_string_is_excluded_and_reported(eng):
    tok = tokenizer()
    prompt = tok.encode(PROMPTS[2])
    full = eng.generate([GenerationRequest(prompt, _greedy(16))])[0][0].text
    stop = full[6:9]
    assert stop and stop in full
    out = eng.generate([GenerationRequest(prompt, _greedy(16, stop=(stop,)))])[0][0]
    assert out.text == full[:full.index(stop)]
    assert out.finish_reason == "stop" and out.matched_stop == stop


def test_eos_gives_stop_and_budget_gives_length(eng, reference):
    tok = tokenizer()
    prompt = tok.encode(PROMPTS[0])
    expected = reference(prompt, 6)
    # Declare a greedy token an end-of-sequence id: the sample ends just before its first use.
    eos = next((t for t in expected if t != expected[0]), expected[0])
    first = expected.index(eos)
    out = engine(eos_ids=[eos]).generate([GenerationRequest(prompt, _greedy(10))])[0][0]
    assert out.finish_reason == "stop" and out.token_ids == expected[:first]
    out = eng.generate([GenerationRequest(prompt, _greedy(2))])[0][0]
    assert out.finish_reason == "length" and out.token_ids == expected[:2]


def test_group_sampling_shares_one_prefill(eng):
    tok = tokenizer()
    prompt = tok.encode(PROMPTS[1])
    single = eng.generate([GenerationRequest(prompt, _greedy(8))])[0][0].token_ids
    before = eng.stats.prefill_rows
    group = eng.generate([GenerationRequest(prompt, _greedy(8, n=4))])[0]
    assert eng.stats.prefill_rows - before == 1
    assert [c.sample_index for c in group] == [0, 1, 2, 3]
    assert all(c.token_ids == single for c in group)
    sampled = eng.generate([GenerationRequest(prompt, SamplingParams(temperature=3.0, max_new_tokens=8,
                                                                     seed=5, n=4))])[0]
    assert len({tuple(c.token_ids) for c in sampled}) > 1      # samples of a group differ
    again = eng.generate([GenerationRequest(prompt, SamplingParams(temperature=3.0, max_new_tokens=8,
                                                                   seed=5, n=4))])[0]
    assert [c.token_ids for c in again] == [c.token_ids for c in sampled]


def test_finished_rows_are_compacted_and_results_stream_as_they_finish(eng):
    tok = tokenizer()
    long_req = GenerationRequest(tok.encode(PROMPTS[0]), _greedy(30))
    short = [GenerationRequest(tok.encode(p), _greedy(2)) for p in PROMPTS]
    alone = eng.generate([long_req])[0][0].token_ids
    order = [c.request_index for c in eng.stream(short + [long_req])]
    assert order[-1] == 3                                    # the long sample finishes last
    mixed = eng.generate(short + [long_req])[3][0].token_ids
    assert mixed == alone


def test_sample_logprobs_are_the_tempered_distribution_of_each_sampled_token(reference):
    """sample_logprobs: one per generated token, plus the EOS that ended the sample, each equal to
    log_softmax(logits / T) of a full forward pass at that position; the sampled tokens are unchanged by
    asking; decode row-steps of rows already finished are counted apart."""
    tok = tokenizer()
    prompt = tok.encode(PROMPTS[1])
    params = SamplingParams(temperature=0.7, max_new_tokens=12, seed=3, n=3)
    plain = engine(eos_ids=[]).generate([GenerationRequest(prompt, params)])[0]
    # An EOS the samples meet: the second token of the first sample, so that sample ends on it.
    eos = plain[0].token_ids[1]
    eng = engine(eos_ids=[eos])
    before = dataclasses.replace(eng.stats)
    got = eng.generate([GenerationRequest(prompt, params, sample_logprobs=True)])[0]
    expected = engine(eos_ids=[eos]).generate([GenerationRequest(prompt, params)])[0]
    assert [c.token_ids for c in got] == [c.token_ids for c in expected]
    graphdef, state = nnx.split(model())
    for c in got:
        ended = c.end_token is not None
        assert ended == (c.finish_reason == "stop") and (not ended or c.end_token == eos)
        assert len(c.sample_logprobs) == len(c.token_ids) + ended
        ids = list(prompt) + c.token_ids + ([c.end_token] if ended else [])
        logits = nnx.merge(graphdef, state)(jnp.asarray([ids])).logits[0]                   # [T, V]
        tempered = jax.nn.log_softmax(logits / 0.7, axis=-1)
        want = [float(tempered[len(prompt) - 1 + j, t]) for j, t in enumerate(ids[len(prompt):])]
        np.testing.assert_allclose(c.sample_logprobs, want, atol=2e-4)
        assert c.seconds > 0
    assert got[0].end_token == eos and len(got[0].token_ids) < 12
    active = eng.stats.active_row_steps - before.active_row_steps
    total = eng.stats.decode_row_steps - before.decode_row_steps
    # Every generated token after the first is one active row-step; the finished sample idles.
    assert active == sum(len(c.sample_logprobs) for c in got) - len(got) and active < total


class ScriptedFeed:
    """A request feed that hands out one scripted list per take() (then None) and records the calls."""

    def __init__(self, *script):
        self.script = list(script)
        self.calls = []

    def take(self, rows, wait):
        self.calls.append((rows, wait))
        return self.script.pop(0) if self.script else None


def test_continuous_batching_admits_requests_while_others_decode():
    """Requests taken between decode chunks join the running batch (caches of both lengths merged),
    finish before the long sample that was already running, and give the same tokens as alone."""
    eng = engine(eos_ids=[], max_batch=4)          # no EOS: every sample runs to its budget
    tok = tokenizer()
    long_req = GenerationRequest(tok.encode(PROMPTS[0]), _greedy(48))
    long_prompt = GenerationRequest(tok.encode(" ".join([PROMPTS[2]] * 12)), _greedy(6))  # longer cache
    group = GenerationRequest(tok.encode(PROMPTS[1]), _greedy(5, n=2))                    # shorter cache
    alone = [eng.generate([r])[0] for r in (long_req, long_prompt, group)]
    assert len(long_prompt.prompt_ids) > 64
    feed = ScriptedFeed([(0, long_req)], [(1, long_prompt)], [], [(2, group)])
    before = eng.stats.prefill_calls
    done = list(eng.serve(feed))
    assert eng.stats.prefill_calls - before == 3
    assert feed.calls[0] == (4, True) and feed.calls[1] == (3, False)   # joined while row 0 decoded
    assert [(c.request_index, c.sample_index) for c in done][-1] == (0, 0)
    got = {(c.request_index, c.sample_index): c.token_ids for c in done}
    assert got == {(i, g): c.token_ids for i, cs in enumerate(alone) for g, c in enumerate(cs)}


def test_batch_mode_follows_the_live_rows(eng):
    """Sampling and constraint steps are compiled in only while some live row needs them: a greedy
    sample keeps its tokens when the sampled and constrained rows beside it finish early."""
    tok = tokenizer()
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    requests = [GenerationRequest(tok.encode(PROMPTS[0]), _greedy(30)),
                GenerationRequest(tok.encode(PROMPTS[1]), SamplingParams(temperature=1.5, top_p=0.9, top_k=5,
                                                                         max_new_tokens=5, seed=9)),
                GenerationRequest(tok.encode(PROMPTS[2]), _greedy(12), json_schema=schema)]
    alone = [eng.generate([r])[0][0].token_ids for r in requests]
    assert [r[0].token_ids for r in eng.generate(requests)] == alone


def test_list_requests_refill_freed_rows_in_order(eng):
    """stream() over a list keeps the batch full: a request waits only for free rows, never for the
    whole batch, and results match running each request alone."""
    tok = tokenizer()
    requests = [GenerationRequest(tok.encode(PROMPTS[i % 3]), _greedy(4 + 9 * (i % 4))) for i in range(12)]
    alone = [eng.generate([r])[0][0].token_ids for r in requests]
    small = engine(max_batch=4)
    before = small.stats.prefill_calls
    got = small.generate(requests)
    assert [r[0].token_ids for r in got] == alone
    assert small.stats.prefill_calls - before > 3            # admissions beyond three full waves


def test_sharded_engine_matches_unsharded_and_leaves_the_model_alone(eng):
    """A sharded engine gives the same tokens from its own placed copy of the parameters: the caller's
    model keeps the very same arrays with the same shardings."""
    tok = tokenizer()
    requests = [GenerationRequest(tok.encode(p), _greedy(6)) for p in PROMPTS]
    plain = [r[0].token_ids for r in eng.generate(requests)]
    mesh = make_mesh((2, 1, 2), devices=jax.devices()[:4])
    before = [(x, x.sharding) for x in jax.tree.leaves(nnx.state(model()))]
    sharded = Engine(model(), tokenizer(), mesh=mesh, chunk_steps=8, max_batch=8)
    got = [r[0].token_ids for r in sharded.generate(requests)]
    sharded.refresh_params()
    assert got == plain
    after = jax.tree.leaves(nnx.state(model()))
    assert len(after) == len(before)
    assert all(x is array and x.sharding == sharding for (array, sharding), x in zip(before, after))
    spec = sharded._decode_model.params["layers"]["mlp"]["gate"].get_value().sharding.spec
    assert "tensor" in str(spec)


def test_bad_requests_get_errors_and_others_run(eng):
    tok = tokenizer()
    good = GenerationRequest(tok.encode(PROMPTS[0]), _greedy(3))
    bad = [GenerationRequest([], _greedy(3)),
           GenerationRequest([1] * 600, _greedy(3)),
           GenerationRequest([10 ** 6], _greedy(3)),
           GenerationRequest(tok.encode("a"), SamplingParams(temperature=-1.0)),
           GenerationRequest(tok.encode("a"), SamplingParams(top_p=0.0))]
    results = eng.generate(bad + [good])
    errors = [r[0].error for r in results[:-1]]
    assert all(e for e in errors)
    assert "non-empty" in errors[0] and "context" in errors[1] and "outside" in errors[2]
    assert "temperature" in errors[3] and "top_p" in errors[4]
    assert results[-1][0].error is None and len(results[-1][0].token_ids) == 3


def test_sampler_filters():
    logits = jnp.asarray(np.random.default_rng(0).normal(size=(4, 50)), jnp.float32)
    top2 = set(np.argsort(-np.asarray(logits[0]))[:2].tolist())
    keys = jnp.asarray(sample_keys([1, 2, 3, 4], [0, 0, 0, 0]))
    greedy = np.argmax(np.asarray(logits), axis=-1)
    seen = set()
    sample = jax.jit(sample_tokens)
    for step in range(30):
        out = sample(logits, keys, jnp.full((4,), step, jnp.int32), jnp.array([1.0, 1.0, 0.0, 5.0]),
                            jnp.array([1.0, 1e-6, 1.0, 1.0]), jnp.array([2, 0, 0, 1]))
        out = np.asarray(out)
        seen.add(int(out[0]))
        assert out[1] == greedy[1] and out[2] == greedy[2] and out[3] == greedy[3]
    assert seen <= top2 and len(seen) == 2


def _sorted_edges(scaled, top_p, top_k):
    """The filter edge by its definition, in float64: sort, keep k, softmax, then the shortest prefix
    whose mass reaches top_p (top_p 1 keeps all k); -inf when every finite token stays."""
    edges = []
    for row, p, k in zip(np.asarray(scaled, np.float64), np.asarray(top_p), np.asarray(top_k)):
        ranked = np.sort(row[np.isfinite(row)])[::-1]
        ranked = ranked[:k] if k > 0 else ranked
        probs = np.exp(ranked - ranked[0]) / np.exp(ranked - ranked[0]).sum()
        kept = len(ranked) if p >= 1 else int(np.sum(np.cumsum(probs) - probs < p))
        edges.append(-np.inf if kept == np.isfinite(row).sum() else ranked[kept - 1])
    return np.asarray(edges, np.float32)


def test_filter_edges_match_the_sorted_definition():
    """The sort-free bisection finds exactly the sorted top-k / top-p edge, ties and -inf included."""
    from jaxwrite.infer.sampling import SMALL_TOP_K, _small_k_edges, filter_edges
    rng = np.random.default_rng(0)
    rows = 240
    scaled = np.round(rng.normal(size=(rows, 300)) * rng.uniform(0.2, 4, size=(rows, 1)), 1)   # many ties
    scaled[rng.uniform(size=scaled.shape) < 0.2] = -np.inf                     # constrained-out tokens
    scaled = jnp.asarray(scaled, jnp.float32)
    top_p = jnp.asarray(rng.choice([1.0, 0.95, 0.8, 0.5, 0.1, 1e-6], rows), jnp.float32)
    top_k = jnp.asarray(rng.choice([0, 1, 2, 20, 299, 1000], rows), jnp.int32)
    got = np.asarray(jax.jit(filter_edges)(scaled, top_p, top_k))
    want = np.asarray(_sorted_edges(scaled, top_p, top_k))
    np.testing.assert_array_equal(got, want)
    # Rows with a small top_k take the lax.top_k path instead; same edges.
    small = (np.asarray(top_k) > 0) & (np.asarray(top_k) <= SMALL_TOP_K)
    assert small.sum() > 50
    np.testing.assert_array_equal(np.asarray(jax.jit(_small_k_edges)(scaled, top_p, top_k))[small], want[small])
    assert (got[np.asarray(top_k) == 1] == np.asarray(scaled).max(axis=-1)[np.asarray(top_k) == 1]).all()


def test_draws_follow_the_softmax():
    """Seeded draws (one uniform per row, inverse CDF) follow softmax(logits / T); -inf never drawn."""
    logits = jnp.asarray([[2.0, 1.0, 0.0, -jnp.inf, 0.5, -1.0]] * 4000, jnp.float32)
    keys = jnp.asarray(sample_keys(list(range(4000)), [0] * 4000))
    out = np.asarray(jax.jit(sample_tokens)(logits, keys, jnp.zeros(4000, jnp.int32), jnp.full(4000, 0.8),
                                            jnp.ones(4000), jnp.zeros(4000, jnp.int32)))
    freq = np.bincount(out, minlength=6) / 4000
    want = np.asarray(jax.nn.softmax(logits[0] / 0.8))
    assert freq[3] == 0 and np.abs(freq - want).max() < 0.03


def test_unfiltered_rows_draw_the_same_token_whatever_the_batch_needs():
    """A row with top-p 1 and no top-k draws over the whole vocabulary with its own key, whether the batch
    skips the sort (no row filters) or not (another row does); the two-pass argmax picks the first max."""
    logits = jnp.asarray(np.random.default_rng(1).normal(size=(2, 300)), jnp.float32)
    keys = jnp.asarray(sample_keys([7, 8], [0, 0]))
    temperature, steps = jnp.array([0.8, 0.8]), jnp.zeros((2,), jnp.int32)
    sample = jax.jit(sample_tokens)
    plain = sample(logits, keys, steps, temperature, jnp.array([1.0, 1.0]), jnp.array([0, 0]))
    mixed = sample(logits, keys, steps, temperature, jnp.array([1.0, 0.5]), jnp.array([0, 3]))
    assert int(plain[0]) == int(mixed[0])
    ties = jnp.array([[0.0, 2.0, 2.0, 1.0]])
    from jaxwrite.infer.sampling import first_argmax
    assert int(first_argmax(ties)[0]) == 1


def test_stop_search_and_streaming_hold_back():
    from jaxwrite.infer.stops import find_stop, safe_length
    assert find_stop("plan</answer> more", ["</answer>", "more"], 0) == (4, "</answer>")
    # Only matches ending after the previous check are new; earlier text was already searched.
    assert find_stop("abc</ans", ["</answer>"], 5) == (-1, None)
    assert find_stop("abc</answer>", ["</answer>"], 8) == (3, "</answer>")
    assert safe_length("hello </ans", ["</answer>"]) == len("hello ")
    assert safe_length("hello \ufffd", []) == len("hello ")
    assert safe_length("hello", ["</answer>"]) == 5
