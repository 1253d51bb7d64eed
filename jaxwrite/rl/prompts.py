"""RL prompt files: jsonl lines {id, prompt, lower?, upper?} -> RolloutPrompt with a word range.

A line without lower/upper takes its range from an explicit length request in the prompt
("write a 3,000-word essay" -> jaxwrite.text.length_range_for), else from `default_range`.
A per-part request ("three poems, each 200 words") says nothing about the whole answer and is
treated as no request.
Prompts left with no range are an error naming the first such line and the count.
"""
from __future__ import annotations

import dataclasses
import logging
import os

from jaxwrite.common import InputError, read_jsonl
from jaxwrite.rl.length import MaxLen, max_len_for
from jaxwrite.rl.types import RolloutPrompt
from jaxwrite.text import length_range_for, parse_length_request

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class RLPromptSet:
    prompts: list[RolloutPrompt]
    num_explicit: int  # lower/upper given in the file
    num_from_request: int  # range derived from a length request in the prompt text
    num_default: int  # neither: default_range used


def _word_count(rec: dict, key: str, path: str, line: int) -> int:
    value = rec[key]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InputError(f"expected a positive integer word count, got {value!r}",
                         path=path, line=line, field=key)
    return value


def load_rl_prompts(path: str | os.PathLike, *, max_len: MaxLen,
                    default_range: tuple[int, int] | None = None) -> RLPromptSet:
    """Reads and validates a prompt file. max_len: every prompt's L_max (see RolloutPrompt), or a
    function of the prompt text (a jaxwrite.rl.length.WordBudget: L_max by the prompt's language)."""
    path = os.fspath(path)
    if not callable(max_len) and max_len <= 0:
        raise ValueError(f"max_len: expected a positive word count, got {max_len}")
    if default_range is not None and not 0 < default_range[0] <= default_range[1]:
        raise ValueError(f"default_range: expected 0 < lower <= upper, got {default_range}")
    prompts, seen = [], {}
    counts = {"explicit": 0, "request": 0, "default": 0}
    missing: list[int] = []
    unreachable: list[tuple[int, int]] = []  # (line, L_max) where upper > L_max: the reward cannot reach 1
    for line, rec in read_jsonl(path, required=("id", "prompt")):
        pid, text = rec["id"], rec["prompt"]
        if not isinstance(pid, (str, int)) or isinstance(pid, bool):
            raise InputError(f"expected a string or integer id, got {pid!r}", path=path, line=line, field="id")
        pid = str(pid)
        if pid in seen:
            raise InputError(f"duplicate id {pid!r} (first on line {seen[pid]})", path=path, line=line, field="id")
        seen[pid] = line
        if not isinstance(text, str) or not text.strip():
            raise InputError("expected a non-empty string", path=path, line=line, field="prompt")
        given = [key for key in ("lower", "upper") if rec.get(key) is not None]
        if len(given) == 1:
            other = "upper" if given[0] == "lower" else "lower"
            raise InputError(f"expected both lower and upper, or neither; {given[0]} is set",
                             path=path, line=line, field=other)
        if given:
            lower, upper = _word_count(rec, "lower", path, line), _word_count(rec, "upper", path, line)
            if lower > upper:
                raise InputError(f"expected upper >= lower ({lower}), got {upper}", path=path, line=line,
                                 field="upper")
            source = "explicit"
        else:
            request = parse_length_request(text)
            # A per-part request ("each 500 words") does not bound the whole answer.
            if request is not None and not request.per_part:
                lower, upper = length_range_for(request)
                if not 0 < lower <= upper:
                    raise InputError(f"length request {request.span!r} gives the range [{lower}, {upper}]; "
                                     f"set lower/upper explicitly", path=path, line=line, field="prompt")
                source = "request"
            elif default_range is not None:
                lower, upper = default_range
                source = "default"
            else:
                missing.append(line)
                continue
        counts[source] += 1
        limit = max_len_for(max_len, text)
        if upper > limit:
            unreachable.append((line, limit))
        prompts.append(RolloutPrompt(id=pid, text=text, lower=lower, upper=upper, max_len=limit))
    if missing:
        raise InputError(f"{len(missing)} prompt(s) have no lower/upper and no length request in the "
                         f"prompt; add a range or pass a default range", path=path, line=missing[0],
                         field="lower")
    if not prompts:
        raise InputError("expected at least one prompt", path=path)
    if unreachable:
        log.warning("%s: %d prompt(s) (first on line %d) want more than max_len=%d words; the length "
                    "reward cannot reach 1 for them", path, len(unreachable), *unreachable[0])
    return RLPromptSet(prompts, counts["explicit"], counts["request"], counts["default"])
