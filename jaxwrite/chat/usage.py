"""What a model's calls cost: requests, tokens, wall time, throughput, cache hits and, with prices, dollars.

`Usage` holds plain counters that add up over runs (`plus`) and subtract for a part of one (`since`);
`to_dict` is the JSON every report and metadata file carries, with the rates derived from the counters.
Tokens are the model's own counts (an endpoint's `usage`, the engine's token ids); requests whose answer
came without counts are counted in `unreported_requests`, and a cost over them is marked incomplete.
Answers served from the call cache cost nothing: their tokens are listed apart (`cached_*_tokens`), and
with prices, what they would have cost is `saved_usd`.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Sequence

from jaxwrite.chat.interface import ChatResult
from jaxwrite.common.errors import InputError


@dataclasses.dataclass(frozen=True)
class Prices:
    """Dollars per million prompt (`input`) and completion (`output`) tokens."""
    input: float
    output: float

    def usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6


def parse_price(value: Any, flag: str) -> float | None:
    """A price as given on the command line (None: not given); a value that is not a finite number, or is
    negative, is a one-line InputError naming `flag`."""
    if value is None:
        return None
    try:
        price = float(value)
    except (TypeError, ValueError):
        price = math.nan
    if not math.isfinite(price) or price < 0:
        raise InputError(f"{flag} {value}: expected a non-negative number (dollars per million tokens)")
    return price


def prices_from(price_in: float | None, price_out: float | None) -> Prices | None:
    """Prices when either is given (the other then counts as free), else None."""
    if price_in is None and price_out is None:
        return None
    return Prices(price_in or 0.0, price_out or 0.0)


_COUNTERS = ("requests", "answered", "errors", "cache_hits", "cache_misses", "uncacheable", "prompt_tokens",
             "completion_tokens", "unreported_requests", "cached_prompt_tokens", "cached_completion_tokens")


@dataclasses.dataclass
class Usage:
    """Counters of one model's calls (see the module note); `wall_s` is the time spent waiting on the
    model (cache look-ups and hits excluded)."""
    requests: int = 0                 # asked of the model
    answered: int = 0                 # ... that came back with text
    errors: int = 0                   # ... that came back with an error (never cached)
    cache_hits: int = 0               # served from the cache, not asked
    cache_misses: int = 0             # cacheable requests the cache did not hold (asked)
    uncacheable: int = 0              # sampled without a seed: asked every time
    prompt_tokens: int = 0
    completion_tokens: int = 0
    unreported_requests: int = 0      # answered without token counts
    cached_prompt_tokens: int = 0
    cached_completion_tokens: int = 0
    wall_s: float = 0.0

    def count_asked(self, results: Sequence[ChatResult], wall_s: float) -> None:
        """Adds the results of one batch asked of the model, which took `wall_s`."""
        self.wall_s += wall_s
        for r in results:
            self.requests += 1
            self.answered += r.ok
            self.errors += not r.ok
            if r.prompt_tokens is None and r.completion_tokens is None:
                self.unreported_requests += r.ok
            self.prompt_tokens += r.prompt_tokens or 0
            self.completion_tokens += r.completion_tokens or 0

    def count_hit(self, result: ChatResult) -> None:
        self.cache_hits += 1
        self.cached_prompt_tokens += result.prompt_tokens or 0
        self.cached_completion_tokens += result.completion_tokens or 0

    def copy(self) -> "Usage":
        return dataclasses.replace(self)

    def plus(self, other: "Usage") -> "Usage":
        return Usage(**{f: getattr(self, f) + getattr(other, f) for f in (*_COUNTERS, "wall_s")})

    def since(self, before: "Usage") -> "Usage":
        """What was counted after `before` (a `copy` taken earlier)."""
        return Usage(**{f: getattr(self, f) - getattr(before, f) for f in (*_COUNTERS, "wall_s")})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "Usage":
        """The counters of a `to_dict` (derived figures are recomputed, not read)."""
        data = data or {}
        return cls(**{f: type(getattr(cls, f, 0))(data.get(f) or 0) for f in (*_COUNTERS, "wall_s")})

    def to_dict(self, prices: Prices | None = None, cache: str | None = None) -> dict[str, Any]:
        """The counters, the rates (None with no time spent) and, with `prices`, the estimated cost.
        `cache`: where the cache lives, or None when it was off."""
        out: dict[str, Any] = {f: getattr(self, f) for f in _COUNTERS}
        out["wall_s"] = round(self.wall_s, 3)
        out["cache"] = cache if cache is not None else "off"
        tokens = self.prompt_tokens + self.completion_tokens
        rate = (lambda n: n / self.wall_s) if self.wall_s > 0 else (lambda n: None)
        out |= {"requests_per_s": rate(self.requests), "tokens_per_s": rate(tokens),
                "completion_tokens_per_s": rate(self.completion_tokens)}
        if prices is not None:
            out["cost"] = {"usd": prices.usd(self.prompt_tokens, self.completion_tokens),
                           "saved_by_cache_usd": prices.usd(self.cached_prompt_tokens, self.cached_completion_tokens),
                           "price_in_per_million": prices.input, "price_out_per_million": prices.output,
                           "complete": self.unreported_requests == 0,
                           "estimate": "tokens x price; requests without token counts add nothing"}
        return out


def usage_total(entries: Sequence[Mapping[str, Any]]) -> Usage:
    """The sum of several `to_dict`s (e.g. every run that wrote one output)."""
    total = Usage()
    for entry in entries:
        total = total.plus(Usage.from_dict(entry))
    return total
