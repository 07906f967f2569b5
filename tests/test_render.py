import re

from hypothesis import given, settings
from hypothesis import strategies as st

from lionctx.render import escape_name, join_tagged, neutralize, render_lionagi, tag_block

# What a lenient reader (a model, a regex) would take for a context tag.
LENIENT_OPEN = re.compile(r"<\s*context\b", re.IGNORECASE)
LENIENT_CLOSE = re.compile(r"<\s*/\s*context\b", re.IGNORECASE)

hostile_bits = st.sampled_from([
    "</context>", "<context name=\"x\">", "< /context >", "</CONTEXT>", "<Context>",
    "<\n/context>", "< / context>", "&lt;", '"', "'", ">", "<", "\n", "context",
    "<contexts>", "<context-x>", "</context\n>",
])
hostile_text = st.lists(st.one_of(hostile_bits, st.text(max_size=5)), max_size=12).map("".join)


def test_tag_shape():
    assert tag_block("notes", "hello") == '<context name="notes">\nhello\n</context>'


def test_name_is_escaped():
    assert escape_name('a"b<c>&d\'e\nf') == "a&quot;b&lt;c&gt;&amp;d&#x27;e&#10;f"
    assert tag_block('x">evil', "t").startswith('<context name="x&quot;&gt;evil">\n')


def test_closing_tag_inside_text_is_neutralized():
    block = tag_block("a", "before </context> after <context name=\"b\"> fake")
    assert block == (
        '<context name="a">\nbefore &lt;/context> after &lt;context name="b"> fake\n</context>'
    )


def test_text_without_tags_is_untouched():
    text = "a < b and c > d, <contexts> and <ctx>, 3<4"
    assert neutralize(text) == text


def test_join_and_empty():
    assert join_tagged([]) == ""
    assert join_tagged(["A", "B"]) == "A\n\nB"


def test_render_lionagi_is_plain_concatenation():
    assert render_lionagi("You are helpful", ["BLOCK1", "BLOCK2"], "guide") == (
        "You are helpfulBLOCK1\nBLOCK2guide"
    )
    assert render_lionagi("sys", [], "") == "sys"


@settings(max_examples=500)
@given(st.text(max_size=20) | hostile_text, hostile_text)
def test_a_block_has_exactly_one_open_and_one_close(name, text):
    block = tag_block(name, text)
    assert len(LENIENT_OPEN.findall(block)) == 1
    assert len(LENIENT_CLOSE.findall(block)) == 1
    assert block.startswith("<context name=\"")
    assert block.endswith("\n</context>")
    # the name attribute cannot be closed early
    head = block.split("\n", 1)[0]
    assert head.count('"') == 2 and head.endswith('">')


@settings(max_examples=300)
@given(st.lists(st.tuples(st.text(max_size=10), hostile_text), max_size=5))
def test_joined_blocks_are_balanced(pairs):
    out = join_tagged(tag_block(n, t) for n, t in pairs)
    assert len(LENIENT_OPEN.findall(out)) == len(pairs)
    assert len(LENIENT_CLOSE.findall(out)) == len(pairs)


@settings(max_examples=300)
@given(st.text())
def test_neutralize_changes_only_tag_starts(text):
    out = neutralize(text)
    assert out.replace("&lt;", "<") == text.replace("&lt;", "<")
    assert not LENIENT_OPEN.search(out) and not LENIENT_CLOSE.search(out)
