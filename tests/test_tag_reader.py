"""The compiled tag reader against the reader it replaced.

``neutralize`` now reads text with one regex built from every code point's reading;
the first implementation (``tests/neutralize_reference.py``) read the characters after
each opener one by one in Python. The escaping rule is a security guarantee, so the
two must agree byte for byte on every input: the properties below draw texts from the
characters where a difference could hide (look-alikes, invisible characters,
compatibility forms, characters that read as nothing or as several letters)."""

import re
import unicodedata

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from lionctx._render import (
    _READS_AS,
    OPENERS,
    _all_code_points,
    _invisible_code_points,
    _unusual,
    neutralize,
)

from .neutralize_reference import neutralize_reference

EVERY = _all_code_points()
INVISIBLE = sorted(set(_invisible_code_points(EVERY)))
# Every character whose reading is not simply itself: not NFKC-stable, changed by
# lower(), white space, invisible.
UNUSUAL = sorted(_unusual(EVERY))
# Characters that expand to several letters, some of "context" among them.
EXPANDING = sorted(cp for cp in UNUSUAL
                   if len(unicodedata.normalize("NFKC", chr(cp))) > 1
                   and set(unicodedata.normalize("NFKC", chr(cp)).lower()) & set("context/ "))
# Characters whose NFKC form is made only of invisible characters, or that differ in
# \w from the first character they read as.
EMPTY_OR_ODD = sorted(
    cp for cp in UNUSUAL
    if all(unicodedata.category(c) in ("Mn", "Me", "Cf", "Cc")
           for c in unicodedata.normalize("NFKC", chr(cp)))
    or bool(re.match(r"\w", chr(cp))) != bool(re.match(r"\w", unicodedata.normalize(
        "NFKC", chr(cp)).lower() or " ")))



def forms_of(letter):
    """Every character that reads as ``letter``."""
    found = {chr(cp) for cp in UNUSUAL
             if unicodedata.normalize("NFKC", chr(cp)).lower() == letter}
    return sorted(found | {letter, letter.upper()}
                  | {k for k, v in _READS_AS.items() if v == letter})


WORD_FORMS = {letter: forms_of(letter) for letter in "contex/"}
chars_from = st.sampled_from
interesting = st.one_of(
    chars_from(sorted(OPENERS)),
    chars_from([chr(cp) for cp in INVISIBLE[::3]]),
    chars_from([chr(cp) for cp in UNUSUAL]),
    chars_from([chr(cp) for cp in EXPANDING] or ["\u2105"]),
    chars_from([chr(cp) for cp in EMPTY_OR_ODD] or ["\uff9e"]),
    chars_from(list("context/ <>_0aéK\u3000\u200b\x1f")),
    st.characters(),
)


@st.composite
def near_tags(draw):
    """An opener, a gap, maybe a slash, ``context`` in any of its forms with
    anything between the letters, then anything."""
    out = [draw(chars_from(sorted(OPENERS)))]
    out += draw(st.lists(interesting, max_size=3))
    if draw(st.booleans()):
        out.append(draw(chars_from(WORD_FORMS["/"])))
        out += draw(st.lists(interesting, max_size=2))
    for letter in "context":
        out.append(draw(chars_from(WORD_FORMS[letter])))
        if draw(st.integers(0, 3)) == 0:
            out += draw(st.lists(interesting, max_size=2))
    out += draw(st.lists(interesting, max_size=3))
    return "".join(out)


texts = st.lists(st.one_of(near_tags(), st.lists(interesting, max_size=6).map("".join),
                           st.text(max_size=6)), max_size=6).map("".join)


@settings(max_examples=700, deadline=None)
@given(texts)
@example("<\u3164context>")  # a Hangul filler (a letter, yet invisible) in the gap
@example("<context\u3164")  # ... and right after the word: it ends the word
@example("<context\uff9e")  # a halfwidth sound mark reads as nothing: the end decides
@example("<context\uff9ex")
@example("<context\u2474")  # a digit (\w) that reads as "(1)": not a letter after it
@example("<context\u2100")  # "a/c": no word character, yet reads as a letter
@example("<\u00a8context")  # a diaeresis reads as a space
@example("\U0001d236/\U0001d41c\U0001d428\U0001d427\U0001d42d\U0001d41e\U0001d431\U0001d42d")
@example("<\u2215\u2215context")  # two slashes are no tag
@example("\u1438\u16b2context")  # an opener that is a letter, then another opener
def test_the_compiled_reader_agrees_with_the_first_one(text):
    assert neutralize(text) == neutralize_reference(text)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(chars_from(sorted(OPENERS)), near_tags(),
                          st.lists(interesting, min_size=1, max_size=40).map("".join)),
                max_size=5))
def test_agreement_with_long_gaps_and_many_openers(parts):
    # Long runs between the openers, repeated: where a reader that backtracks or
    # loses its place would show it.
    text = "".join(a + b * 3 + c * 5 for a, b, c in parts)
    assert neutralize(text) == neutralize_reference(text)


ascii_interesting = chars_from(list("<>/ \t\n\r\x00\x01\x0b\x1f\x7fcontexCONTEX_0a"))


@st.composite
def ascii_near_tags(draw):
    """:func:`near_tags` in ASCII alone: the library reads such text with a regex of its
    own, the reference with the same character walk as any other text."""
    out = ["<"] + draw(st.lists(ascii_interesting, max_size=3))
    if draw(st.booleans()):
        out += ["/"] + draw(st.lists(ascii_interesting, max_size=2))
    for letter in "context":
        out.append(draw(chars_from([letter, letter.upper()])))
        if draw(st.integers(0, 3)) == 0:
            out += draw(st.lists(ascii_interesting, max_size=2))
    out += draw(st.lists(ascii_interesting, max_size=3))
    return "".join(out)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(ascii_near_tags(), st.lists(ascii_interesting, max_size=6)
                          .map("".join)), max_size=6).map("".join))
@example("<c\x01o\x7fntext")  # controls between the letters are read past
@example("< /\tcontext_")  # a word character after the word: no tag
def test_ascii_text_agrees_with_the_character_walk(text):
    assert text.isascii()
    assert neutralize(text) == neutralize_reference(text)


@pytest.mark.parametrize("cp", [0x3164, 0x115F, 0x1160, 0xFFA0, 0xFFF0, 0xE0001, 0xE0FFF,
                                0xD800, 0xDFFF, 0x200B, 0x00AD, 0xFE0F, 0x1D167, 0x1E94A])
def test_each_invisible_kind_in_every_position(cp):
    ch = chr(cp)
    for text in [f"<{ch}context", f"<{ch}/{ch}context", f"<c{ch}o{ch}ntext",
                 f"<context{ch}", f"<context{ch}x", f"{ch}<context{ch}>"]:
        assert neutralize(text) == neutralize_reference(text), ascii(text)


def test_every_listed_character_after_the_word_decides_as_the_first_reader_did():
    # One character after "<context": every character with a reading of its own, and
    # every 7th other code point (for those the compiled reader relies on \w, which
    # the next test checks for all of them).
    listed = set(UNUSUAL) | set(INVISIBLE) | {ord(c) for c in OPENERS}
    for cp in sorted(listed | set(range(0, len(EVERY), 7))):
        text = "<context" + chr(cp)
        if neutralize(text) != neutralize_reference(text):
            pytest.fail(f"the readers disagree on U+{cp:04X}")


def test_regex_word_class_is_the_rules_word_test():
    # The compiled reader relies on \w being exactly isalnum() or "_".
    words = set(re.findall(r"\w", EVERY))
    assert words == {c for c in EVERY if c.isalnum() or c == "_"}


@settings(max_examples=300, deadline=None)
@given(texts, st.integers(1, 12))
def test_reading_in_pieces_agrees_with_reading_whole(text, piece):
    # Long texts are read in pieces cut just before an opener; with tiny pieces every
    # opener is a cut, and the result must not change.
    import lionctx._render as render

    saved = render._PIECE
    render._PIECE = piece
    try:
        assert neutralize(text) == neutralize_reference(text)
    finally:
        render._PIECE = saved
