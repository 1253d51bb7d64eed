"""The LongWriter-Zero length reward contract."""
import pytest

from jaxwrite.rl import length_reward


@pytest.mark.parametrize("n, expected", [
    (0, 0.0), (450, 0.5), (899, 899 / 900),      # below: n / lower
    (900, 1.0), (1000, 1.0), (1100, 1.0),        # inside, both ends included
    (1150, 0.95), (2100, 0.0), (5000, 0.0),      # above: (max − n) / (max − upper), clipped at 0
])
def test_length_reward_piecewise(n, expected):
    assert length_reward(n, 900, 1100, 2100) == pytest.approx(expected)


def test_max_len_at_or_below_upper_scores_zero_above_range():
    assert length_reward(1101, 900, 1100, 1100) == 0.0
    assert length_reward(1101, 900, 1100, 1000) == 0.0
    assert length_reward(1000, 900, 1100, 1000) == 1.0


def test_point_range():
    assert length_reward(500, 500, 500, 1000) == 1.0
    assert length_reward(750, 500, 500, 1000) == pytest.approx(0.5)


@pytest.mark.parametrize("args, field", [
    ((-1, 900, 1100, 2000), "n_words"), ((10, 0, 1100, 2000), "lower"),
    ((10, 900, 800, 2000), "upper"), ((10, 900, 1100, 0), "max_len"),
])
def test_invalid_arguments_name_the_field(args, field):
    with pytest.raises(ValueError, match=field):
        length_reward(*args)
