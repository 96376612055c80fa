"""How English writes a number: digits, number words, fractions and scales. No units here (`units`)."""

from __future__ import annotations

import re

from proctor.judging.equivalence.codes import mask_codes, special_numbers

NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100,
    "a dozen": 12, "dozen": 12,
}  # fmt: skip
FRACTIONS = {
    "half": 0.5, "a half": 0.5, "one half": 0.5, "a third": 1 / 3, "one third": 1 / 3,
    "a quarter": 0.25, "one quarter": 0.25, "three quarters": 0.75, "two thirds": 2 / 3,
}  # fmt: skip
SCALES = {"thousand": 1e3, "million": 1e6, "billion": 1e9}
# Digits, with thousands separators or a decimal part.
NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
# Digits not glued to letters before them: the "2" and "19" of "CYP2C19", "E2210" or "x86" are no numbers.
GLUED_NUM = rf"(?<![A-Za-z_\d])(?:{NUM})"
# The one-word number words, as an alternation.
NUMBER_WORD = "|".join(w for w in NUMBER_WORDS if " " not in w)
FRACTION_WORDS = "|".join(sorted(FRACTIONS, key=len, reverse=True))
# Fraction words a hyphen joins to a number ("two-thirds").
HYPHENED_FRACTIONS = ("thirds?", "quarters?", "halves", "half", "fifths?", "tenths?")

# "twenty-five": a tens word and a units word, from the number words above.
_TENS = {w: v for w, v in NUMBER_WORDS.items() if 20 <= v <= 90 and v % 10 == 0}
_ONES = {w: v for w, v in NUMBER_WORDS.items() if 1 <= v <= 9}
_COMPOUND = re.compile(rf"\b({'|'.join(_TENS)})[-\s]({'|'.join(_ONES)})\b(?!\s+hundred)")


def compounds_as_digits(text: str) -> str:
    """ "twenty-five" as "25"."""
    return _COMPOUND.sub(lambda m: str(_TENS[m[1]] + _ONES[m[2]]), text)


def number(word: str) -> float | None:
    """The value of one token written as digits or as a number word, else None."""
    w = word.lower().replace(",", "")
    if re.fullmatch(r"\d+(\.\d+)?", w):
        return float(w)
    v = NUMBER_WORDS.get(w)
    return None if v is None else float(v)


# Number words that are more often not a quantity ("owns one", "a dozen eggs" in a description of 14).
NOT_A_QUANTITY = frozenset({"zero", "one", "a dozen", "dozen", "hundred"})
_WORD_NUMBER = re.compile(
    r"\b(" + "|".join(w for w in NUMBER_WORDS if w not in NOT_A_QUANTITY) + r")\b", re.IGNORECASE
)


def number_mentions(text: str) -> list[tuple[int, int, float]]:
    """(start, end, value) of each number a text states as digits or as a number word (not "one", "a
    dozen" and the like, which are more often not a quantity). Version strings and the digits inside a
    code ("CYP2C19"), an ISO date or a variant ("c.699G>A") are not numbers (`codes`); "75 × 10⁹" and
    "4k" are their values."""
    text, out = special_numbers(mask_codes(text))
    out += [(m.start(), m.end(), float(m[0].replace(",", ""))) for m in re.finditer(GLUED_NUM, text)]
    out += [(m.start(), m.end(), float(NUMBER_WORDS[m[0].lower()])) for m in _WORD_NUMBER.finditer(text)]
    return sorted(out)


def stated_numbers(text: str) -> set[float]:
    """Numbers a text states as digits or number words (the forms the guard requires of a reference)."""
    return {v for _, _, v in number_mentions(text)}


def half_last_place(value: float) -> float:
    """Half the place of the last digit a number was written to: 2590 → 5, 196 → 0.5, 195.8 → 0.05."""
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    if "." in text:
        return 0.5 * 10.0 ** -len(text.split(".")[1])
    digits = text.lstrip("-")
    return 0.5 * 10.0 ** (len(digits) - len(digits.rstrip("0"))) if digits != "0" else 0.5
