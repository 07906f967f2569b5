import gzip
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lionctx import TokenizerDataError, count_tokens
from lionctx import _tokens as tokens
from lionctx._tokens import O200K_FILE, O200K_SHA256, get_encoding, resolve_counter


def test_known_counts():
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2
    assert count_tokens("Hello, world!") == 4


def test_special_token_text_counts_as_ordinary_text():
    enc = get_encoding()
    text = "before <|endoftext|> after <|endofprompt|>"
    n = count_tokens(text)
    assert n == len(enc.encode(text, disallowed_special=()))
    assert n > count_tokens("before  after ")
    # the special token text alone is several ordinary tokens, never 0
    assert count_tokens("<|endoftext|>") > 1


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_count_equals_encode_with_no_disallowed_special(text):
    enc = get_encoding()
    assert count_tokens(text) == len(enc.encode(text, disallowed_special=()))


def test_bundled_file_matches_official_hash():
    import hashlib

    raw = gzip.decompress(O200K_FILE.read_bytes())
    assert hashlib.sha256(raw).hexdigest() == O200K_SHA256


def test_missing_data_names_the_file(tmp_path):
    missing = tmp_path / "nope.tiktoken.gz"
    with pytest.raises(TokenizerDataError) as err:
        tokens._load_o200k(missing)
    assert str(missing) in str(err.value)
    assert "reinstall" in str(err.value)


def test_corrupt_data_is_refused_with_its_hash(tmp_path):
    bad = tmp_path / "o200k_base.tiktoken.gz"
    raw = gzip.decompress(O200K_FILE.read_bytes())
    bad.write_bytes(gzip.compress(raw[:-10] + b"AAAA= 1\n"))
    with pytest.raises(TokenizerDataError) as err:
        tokens._load_o200k(bad)
    assert str(bad) in str(err.value)
    assert O200K_SHA256 in str(err.value)


def test_not_gzip_is_refused(tmp_path):
    bad = tmp_path / "o200k_base.tiktoken.gz"
    bad.write_bytes(b"this is not gzip")
    with pytest.raises(TokenizerDataError, match="unreadable"):
        tokens._load_o200k(bad)


def test_import_does_not_load_the_tokenizer():
    code = (
        "import sys, lionctx, agentium_compat\n"
        "heavy = [m for m in ('tiktoken', 'openai', 'httpx') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "n = lionctx.count_tokens('hi there')\n"
        "assert 'tiktoken' in sys.modules\n"
        "print(n)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).parent.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2"


def test_first_load_is_once_and_thread_safe(monkeypatch):
    monkeypatch.setattr(tokens, "_encodings", {})
    calls = []
    real = tokens._load_o200k

    def counting_load(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(tokens, "_load_o200k", counting_load)
    got = []
    barrier = threading.Barrier(6)

    def worker():
        barrier.wait()
        got.append(tokens.get_encoding())

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert len({id(e) for e in got}) == 1


def test_pluggable_counter():
    assert count_tokens("a b c", encoding=lambda s: len(s.split())) == 3
    assert count_tokens("hello world", encoding="o200k_base") == 2
    assert resolve_counter(len)("abcd") == 4
    with pytest.raises(TypeError, match="counter"):
        resolve_counter(42)  # type: ignore[arg-type]


def test_non_str_is_refused():
    with pytest.raises(TypeError, match="bytes"):
        count_tokens(b"x")  # type: ignore[arg-type]


def test_long_texts_are_counted_exactly_and_not_kept():
    enc = get_encoding()
    text = "".join(f"line {i}: lorem ipsum <|endoftext|> dolor\n" for i in range(2000))
    before = sys.getrefcount(text)
    assert count_tokens(text) == len(enc.encode(text, disallowed_special=()))
    assert count_tokens(text) == len(enc.encode(text, disallowed_special=()))  # cached path
    assert sys.getrefcount(text) == before  # the cache holds a digest, not the text


def test_clear_token_cache():
    from lionctx._tokens import clear_token_cache

    count_tokens("abc " * 1000)
    clear_token_cache()
    assert count_tokens("abc " * 1000) == count_tokens("abc " * 1000)


# -- the memo: no cliff, bounded, never a wrong count -------------------------------

def test_memo_holds_many_more_distinct_texts_than_the_old_lru(monkeypatch):
    from lionctx import _tokens as tokens

    counter = tokens.get_counter()
    tokens.clear_token_cache()
    texts = [f"stable text number {i}" for i in range(10_000)]
    first = [counter(t) for t in texts]
    calls = []
    enc = tokens.get_encoding()
    real = enc.encode_ordinary
    monkeypatch.setattr(enc, "encode_ordinary", lambda t: calls.append(t) or real(t))
    assert [counter(t) for t in texts] == first
    assert calls == []  # every one of the 10,000 was a hit


def test_memo_is_bounded_and_evicts_the_oldest(monkeypatch):
    from lionctx import _tokens as tokens

    monkeypatch.setattr(tokens, "MEMO_SIZE", 100)
    tokens.clear_token_cache()
    counter = tokens.get_counter()
    for i in range(1_000):
        counter(f"text {i}")
    memo_sizes = [len(c.__self__) for c in tokens._caches if hasattr(c, "__self__")]
    assert memo_sizes and max(memo_sizes) <= 100
    tokens.clear_token_cache()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=50), min_size=1, max_size=30))
def test_memoized_counts_equal_the_encoder(texts):
    from lionctx import _tokens as tokens

    enc = tokens.get_encoding()
    counter = tokens.get_counter()
    for t in texts + texts:
        assert counter(t) == len(enc.encode_ordinary(t))
