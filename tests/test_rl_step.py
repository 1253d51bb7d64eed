"""The pieces chained as a GRPO step calls them: rewards -> advantages -> loss gradient."""
import jax
import jax.numpy as jnp
import numpy as np

from jaxwrite.rl import (RolloutPrompt, RolloutSample, completed_mask, grpo_policy_loss,
                         group_advantages_with_stats, make_reward, score_groups)


def test_better_samples_are_pushed_up():
    prompt = RolloutPrompt(id="p", text="Write about 4 words.", lower=4, upper=4, max_len=8)
    texts = ["<think>p</think><answer>one two three four</answer>",   # right length, well formed
             "<think>p</think><answer>one two</answer>",               # too short
             "<think>p</think><answer>one two three four five six",    # cut by the cap
             "one two three four"]                                     # no tags
    finishes = ["stop", "stop", "length", "stop"]
    group = [RolloutSample(t, f, num_tokens=8) for t, f in zip(texts, finishes)]
    rewards = score_groups({"length": make_reward("length"), "format": make_reward("format")},
                           [prompt], [group])  # [1, 4, 2]
    advantages, stats = group_advantages_with_stats(rewards)
    adv = advantages.reshape(-1)  # [4], prompt-major like score_groups
    assert adv.argmax() == 0 and adv[0] > 0
    assert int(stats["zero_variance_prompts"]) == 0

    logp = jnp.full((4, 8), -2.0)  # [B, T]
    mask = jnp.ones((4, 8))
    keep = completed_mask(finishes)
    grad = jax.grad(lambda lp: grpo_policy_loss(lp, logp, jnp.asarray(adv, jnp.float32), mask,
                                                sample_mask=keep)[0])(logp)
    assert np.all(np.asarray(grad[0]) < 0)  # descent raises the best sample's log-probs
    assert np.all(np.asarray(grad[2]) == 0)  # the truncated sample is excluded
