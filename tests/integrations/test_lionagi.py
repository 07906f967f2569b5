"""lionctx providers in a real ``lionagi.Branch`` (lionagi 0.36.0), against the local server."""

from __future__ import annotations

import sqlite3

import lionctx
import pytest
from lionctx import CachedContextProvider, SqliteContextProvider
from lionctx.integrations.lionagi import instruction_text, provider

from .helpers import KB

pytestmark = pytest.mark.anyio

# LionAGI renders this turn's instruction as YAML; this is that text.
RENDERED = "Guidance: Be brief.\nInstruction: Where is my order?\nContext:\n- order: 42"


def make_branch(server, tmp_path, system: str = "You are helpful."):
    from lionagi import Branch, iModel

    model = iModel(provider="openai", model="lionctx-echo", base_url=server.base_url,
                   api_key="test-key", allow_local_network=True)
    # Logs go to the temp dir and are not dumped at exit.
    return Branch(system=system, chat_model=model,
                  log_config={"persist_dir": str(tmp_path / "logs"), "auto_save_on_exit": False})


@pytest.fixture
def profiles(tmp_path):
    db = tmp_path / "profiles.db"
    with sqlite3.connect(db) as conn:
        conn.execute("create table profile (user_id text, plan text)")
        conn.executemany("insert into profile values (?, ?)", [("u1", "gold"), ("u2", "free")])
    conn.close()
    return db


async def test_builtin_provider_gets_rendered_instruction_and_bound_user(server, tmp_path,
                                                                       profiles):
    branch = make_branch(server, tmp_path)
    sql = "select plan, :query as asked from profile where user_id = :user_id"
    branch.providers.register(SqliteContextProvider(profiles, sql, name="profile"))
    with lionctx.bind_run_context(user_id="u1", tenant_id="acme"):
        await branch.chat("Where is my order?", guidance="Be brief.", context={"order": 42})
    report = branch.last_context_report
    assert [f["provider_name"] for f in report.fired] == ["profile"]
    assert report.blocks == [f"plan: gold\nasked: {RENDERED}"]
    sent = server.requests[-1]["messages"]
    assert "plan: gold" in sent[-1]["content"]
    # Without a bound user the per-user query finds nothing: the row is empty, not u1's.
    server.clear()
    await branch.chat("Where is my order?", guidance="Be brief.", context={"order": 42})
    assert branch.last_context_report.fired == []
    assert "plan: gold" not in server.requests[-1]["messages"][-1]["content"]


async def test_query_is_stable_across_turns_so_a_cache_hits(server, tmp_path):
    kb = KB()
    cached = CachedContextProvider(provider(kb), ttl=60)
    branch = make_branch(server, tmp_path)
    branch.providers.register(cached)
    with lionctx.bind_run_context(user_id="u7"):
        await branch.chat("Where is my order?", guidance="Be brief.", context={"order": 42})
        await branch.chat("Where is my order?", guidance="Be brief.", context={"order": 42})
    # One real fetch; the second turn's identical query was a cache hit.
    assert kb.calls == [(RENDERED, "u7")]
    assert branch.last_context_report.fired[0]["provider_name"] == "kb"


async def test_fetch_only_provider_wrapped_and_text_never_persisted(server, tmp_path):
    kb = KB(text="SECRET-CONTEXT")
    branch = make_branch(server, tmp_path)
    branch.providers.register(provider(kb))
    await branch.chat("hello")
    assert kb.calls == [("Instruction: hello", None)]
    assert "SECRET-CONTEXT" in server.requests[-1]["messages"][-1]["content"]
    stored = " ".join(str(m.content.rendered) for m in branch.messages)
    assert "SECRET-CONTEXT" not in stored


def test_tool_schemas_and_response_format_are_not_part_of_the_query():
    from lionagi.protocols.messages.instruction import InstructionContent

    schema = {"type": "function", "function": {"name": "lookup", "parameters": {}}}
    content = InstructionContent(instruction="Where is my order?", guidance="Be brief.",
                                 prompt_context=[{"order": 42}], tool_schemas=[schema],
                                 response_format={"answer": "str"})
    assert "lookup" in content.rendered  # LionAGI itself sends them...
    assert instruction_text(content) == RENDERED  # ...the query leaves them out


def test_instruction_text_plain_content_and_images():
    from lionagi.protocols.messages.instruction import InstructionContent

    assert instruction_text(InstructionContent(plain_content="just this")) == "just this"
    img = InstructionContent(instruction="look", images=["data:image/png;base64,iVBORw0KGgo="],
                             image_detail="low")
    assert instruction_text(img) == "Instruction: look"


def test_wrapping_a_non_provider_names_it():
    with pytest.raises(TypeError, match="has no fetch"):
        provider(object())


class Static:
    def __init__(self, name: str, text: str) -> None:
        self.name = name
        self.text = text

    async def provide(self, branch, instruction):
        return self.text


@pytest.mark.parametrize("guidance", ["Be brief.", "Line one.\nLine two."])
async def test_render_lionagi_fold_is_exactly_lionagis_guidance_value(server, tmp_path, guidance):
    """What ``render="lionagi"`` matches: the fold string, byte for byte. LionAGI sends
    it as the YAML ``Guidance`` value of its first instruction; lionctx's message
    framing around it is lionctx's own (see the README)."""
    import yaml
    from lionctx import Branch as LionctxBranch
    from lionctx import OpenAIChatModel
    from lionctx._render import render_lionagi

    system = "You are helpful."
    blocks = ["BLOCK-A\nsecond line", "BLOCK-B"]
    real = make_branch(server, tmp_path, system)
    for i, text in enumerate(blocks):
        real.providers.register(Static(f"p{i}", text), priority=10 - i)
    await real.chat("question one", guidance=guidance)
    lionagi_user = server.requests[-1]["messages"][0]["content"]
    doc = yaml.safe_load(lionagi_user)
    fold = render_lionagi(system, blocks, guidance)
    assert doc["Guidance"] == fold  # the fold is exact...
    assert doc["Instruction"] == "question one"

    ours = LionctxBranch(system, OpenAIChatModel("lionctx-echo", base_url=server.base_url,
                                                 api_key="k", max_retries=0), render="lionagi")
    for i, text in enumerate(blocks):
        ours.providers.register(Static(f"p{i}", text), priority=10 - i)
    await ours.chat("question one", guidance=guidance)
    lionctx_user = server.requests[-1]["messages"][0]["content"]
    assert lionctx_user == fold + "\n\nquestion one"  # ...the framing is lionctx's own
    assert lionctx_user != lionagi_user


async def test_second_turn_differs_from_lionagi_as_documented(server, tmp_path):
    """On turn two both fold into the first instruction; LionAGI's fold keeps that
    instruction's guidance, lionctx's fold has none (the guidance follows in the
    stored text). The README states exactly this."""
    import yaml
    from lionctx import Branch as LionctxBranch
    from lionctx import OpenAIChatModel
    from lionctx._render import render_lionagi

    real = make_branch(server, tmp_path, "SYS.")
    real.providers.register(Static("a", "BLOCK"))
    server.script("r1", "r2")
    await real.communicate("q1", guidance="G1.")
    await real.communicate("q2", guidance="G2.")
    first, _, current = server.requests[-1]["messages"]
    assert yaml.safe_load(first["content"])["Guidance"] == render_lionagi("SYS.", ["BLOCK"], "G1.")
    assert yaml.safe_load(current["content"]) == {"Guidance": "G2.", "Instruction": "q2"}

    ours = LionctxBranch("SYS.", OpenAIChatModel("m", base_url=server.base_url, api_key="k",
                                                 max_retries=0), render="lionagi")
    ours.providers.register(Static("a", "BLOCK"))
    server.script("r1", "r2")
    await ours.communicate("q1", guidance="G1.")
    await ours.communicate("q2", guidance="G2.")
    first, _, current = server.requests[-1]["messages"]
    assert first["content"] == render_lionagi("SYS.", ["BLOCK"], "") + "\n\nG1.\n\nq1"
    assert current["content"] == "G2.\n\nq2"


def test_a_corrupt_bundled_tokenizer_is_refused_as_tokenizer_data(tmp_path, monkeypatch):
    import gzip

    from lionctx import TokenizerDataError
    from lionctx import _tokens as tokens_module
    from lionctx.integrations.lionagi import use_bundled_tokenizer

    corrupt = tmp_path / "o200k_base.tiktoken.gz"
    corrupt.write_bytes(gzip.compress(b"not the encoding"))
    monkeypatch.setattr(tokens_module, "O200K_FILE", corrupt)
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    with pytest.raises(TokenizerDataError, match="corrupt"):
        use_bundled_tokenizer(tmp_path / "cache")
    assert not list((tmp_path / "cache").iterdir())  # nothing written for tiktoken

