"""LongWriter-Zero length reward on the answer's word count (arXiv:2506.18841)."""
from __future__ import annotations


def length_reward(n_words: int, lower: int, upper: int, max_len: int) -> float:
    """1 inside [lower, upper]; n/lower below; (max_len − n)/(max_len − upper) above, clipped at 0.

    `max_len` is L_max, the longest answer the generation cap allows (words). When
    max_len <= upper there is no room for a decay ramp, so any answer above `upper` scores 0.
    """
    if n_words < 0:
        raise ValueError(f"n_words: expected >= 0, got {n_words}")
    if lower <= 0:
        raise ValueError(f"lower: expected a positive word count, got {lower}")
    if upper < lower:
        raise ValueError(f"upper: expected >= lower ({lower}), got {upper}")
    if max_len <= 0:
        raise ValueError(f"max_len: expected a positive word count, got {max_len}")
    if n_words < lower:
        return n_words / lower
    if n_words <= upper:
        return 1.0
    if max_len <= upper:
        return 0.0
    return max(0.0, (max_len - n_words) / (max_len - upper))
