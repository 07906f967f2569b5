"""The pieces hosts use to wire an engine: resolve_context_engine, clone_engine,
EngineSession, summary_model / ThreadBridgeModel."""

import logging

import anyio
import pytest
from lionctx import models, testing
from lionctx.engines import (
    ContextCompressor,
    ContextEngine,
    clone_engine,
    register_context_engine,
    resolve_context_engine,
)
from lionctx.engines._session import EngineSession, ThreadBridgeModel, summary_model

from tests.engines.recording import Plain


class Engine(Plain):
    def __init__(self):
        super().__init__("wired")


class Lifecycle(Engine):
    def on_session_start(self, session_id=None, **kwargs):
        self.calls.append(("start", session_id))

    def on_session_end(self, session_id=None, messages=None, **kwargs):
        self.calls.append(("end", session_id, messages))

    def on_session_reset(self):
        super().on_session_reset()
        self.calls.append(("reset",))


class Broken(Engine):
    def on_session_start(self, session_id=None, **kwargs):
        raise RuntimeError("start failed")

    def on_session_end(self, session_id=None, messages=None, **kwargs):
        raise RuntimeError("end failed")

    def on_session_reset(self):
        raise RuntimeError("reset failed")

    def clone_for_agent(self):
        raise RuntimeError("cannot clone")


# -- resolve_context_engine -----------------------------------------------------------


def test_nothing_asked_means_no_engine():
    assert resolve_context_engine() is None
    assert resolve_context_engine(None, None) is None


def test_instance_is_used_as_is_unless_it_is_the_registered_one():
    mine = Engine()
    assert resolve_context_engine(mine) is mine
    shared = Engine()
    assert register_context_engine(shared)
    got = resolve_context_engine(shared)
    assert isinstance(got, Engine) and got is not shared


def test_names_and_configurations(tmp_path):
    assert isinstance(resolve_context_engine("compressor"), ContextCompressor)
    section = resolve_context_engine(None, {"compressor": {"context_length": 7000}})
    assert isinstance(section, ContextCompressor) and section.context_length == 7000
    full = resolve_context_engine(None, {"context": {"compressor": {"context_length": 6000}}})
    assert full.context_length == 6000
    toml = tmp_path / "cfg.toml"
    toml.write_text(
        '[context]\nengine = "compressor"\n[context.compressor]\ncontext_length = 5000\n')
    assert resolve_context_engine(None, toml).context_length == 5000
    # an explicit name wins over the configuration's engine; its settings still apply
    named = resolve_context_engine("compressor", {"engine": "elsewhere",
                                                  "compressor": {"context_length": 4000}})
    assert isinstance(named, ContextCompressor) and named.context_length == 4000


def test_compressor_gets_the_model():
    model = models.OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1")
    assert resolve_context_engine("compressor", model=model).model is model
    # an instance with nothing to summarize with gets the host's model; others keep theirs
    bare = ContextCompressor()
    assert resolve_context_engine(bare, model=model) is bare and bare.model is model
    own = ContextCompressor(summarize=lambda msgs, prev: "s")
    assert resolve_context_engine(own, model=model).model is None


@pytest.mark.parametrize(
    ("engine", "config", "error", "match"),
    [
        (Engine, None, TypeError, "instance, not the class"),
        (7, None, TypeError, "7"),
        ("", None, ValueError, "non-empty"),
        (None, {"engin": "x"}, ValueError, "'engin'"),
        (Engine(), {"engine": "x"}, ValueError, "'wired'"),
        (None, 12, TypeError, "12"),
    ],
)
def test_bad_arguments_are_named(engine, config, error, match):
    with pytest.raises(error, match=match):
        resolve_context_engine(engine, config)


# -- clone_engine ---------------------------------------------------------------------


def test_clone_engine_clones_and_falls_back_naming_the_engine(caplog):
    engine = Engine()
    clone = clone_engine(engine)
    assert isinstance(clone, Engine) and clone is not engine
    caplog.set_level(logging.WARNING)
    model = models.OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1")
    fallback = clone_engine(Broken(), model=model)
    assert isinstance(fallback, ContextCompressor) and fallback.model is model
    assert any("'wired'" in r.getMessage() and "RuntimeError" in r.getMessage()
               for r in caplog.records)
    with pytest.raises(TypeError, match="ContextEngine"):
        clone_engine("wired")


# -- EngineSession --------------------------------------------------------------------


def test_session_lifecycle():
    engine = Lifecycle()
    session = EngineSession(engine)
    assert not session.active and session.end() is False
    session.start("s-1")
    session.start("ignored: already active")
    assert session.active and engine.calls == [("start", "s-1")]
    history = [{"role": "user", "content": "x", "meta": {"k": 1}}]
    assert session.end(history) is True
    (_, sid, got), = engine.calls[1:]
    assert sid == "s-1" and got == history and got[0]["meta"] is not history[0]["meta"]
    session.start()  # no id given: a fresh one is minted
    minted = engine.calls[-1][1]
    assert len(minted) == 32 and minted != "s-1"
    session.reset([])
    assert engine.calls[-2:] == [("end", minted, []), ("reset",)]
    assert not session.active


def test_fixed_session_id_is_kept_across_sessions():
    engine = Lifecycle()
    session = EngineSession(engine, session_id="conv-9")
    session.start("other")
    session.end()
    session.start()
    assert [c[1] for c in engine.calls] == ["conv-9", "conv-9", "conv-9"]


def test_hook_errors_are_contained(caplog):
    caplog.set_level(logging.WARNING)
    session = EngineSession(Broken())
    session.start()
    assert session.active
    session.reset([{"role": "user", "content": "x"}])
    assert not session.active
    text = caplog.text
    assert "on_session_start raised RuntimeError" in text
    assert "on_session_end raised RuntimeError" in text
    assert "on_session_reset raised RuntimeError" in text


def test_hooks_not_overridden_are_skipped(monkeypatch):
    called = []
    monkeypatch.setattr(ContextEngine, "on_session_start", lambda self, **kw: called.append(1))
    monkeypatch.setattr(ContextEngine, "on_session_end", lambda self, **kw: called.append(2))
    session = EngineSession(Engine())
    session.start()
    session.end([{"role": "user", "content": "x"}])
    assert called == []


def test_session_needs_an_engine():
    with pytest.raises(TypeError, match="ContextEngine"):
        EngineSession(object())


# -- summary_model ----------------------------------------------------------------------


class AsyncOnly:
    def __init__(self, inner):
        self.inner = inner

    async def complete(self, messages, **kwargs):
        return await self.inner.complete(messages, **kwargs)


def test_summary_model_picks_what_a_compressor_can_use():
    sync = models.OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1")
    assert summary_model(sync) is sync
    assert summary_model(None) is None
    assert summary_model(object()) is None
    bridged = summary_model(AsyncOnly(sync))
    assert isinstance(bridged, ThreadBridgeModel) and bridged.model.inner is sync
    with pytest.raises(TypeError, match="complete"):
        ThreadBridgeModel(object())


@pytest.mark.anyio
async def test_bridge_runs_the_async_model_from_a_worker_thread():
    with testing.LocalOpenAIServer() as server:
        server.script("bridged reply")
        model = models.OpenAIChatModel("m", base_url=server.base_url, max_retries=0)
        bridge = ThreadBridgeModel(AsyncOnly(model))
        reply = await anyio.to_thread.run_sync(
            bridge.complete_sync, [{"role": "user", "content": "hi"}])
        assert reply.content == "bridged reply"
        assert server.last_request["messages"] == [{"role": "user", "content": "hi"}]
