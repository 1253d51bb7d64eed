"""Chinese numerals as written in length requests: 五千, 两千, 八百, 一万五千, 三十."""
from __future__ import annotations

_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_UNITS = {"十": 10, "百": 100, "千": 1000}
ZH_NUMERAL_CHARS = "".join(_DIGITS) + "".join(_UNITS) + "万"


def parse_zh_numeral(text: str) -> int:
    """Value of a Chinese numeral: with units (a leading 十 means 1×10), or digit by digit (二〇二四)."""
    if text and all(ch in _DIGITS for ch in text):
        return int("".join(str(_DIGITS[ch]) for ch in text))
    total = section = digit = 0
    for ch in text:
        if ch in _DIGITS:
            digit = _DIGITS[ch]
        elif ch in _UNITS:
            section += (digit or 1) * _UNITS[ch]
            digit = 0
        elif ch == "万":
            total += (section + digit or 1) * 10000
            section = digit = 0
        else:
            raise ValueError(f"'{ch}' in {text!r} is not a Chinese numeral character")
    return total + section + digit
