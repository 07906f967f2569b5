import pytest
from lionctx import _gather as gather_module


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def server():
    """The bundled OpenAI-compatible offline echo server on 127.0.0.1 (recording requests)."""
    from lionctx.testing import LocalOpenAIServer

    with LocalOpenAIServer() as srv:
        yield srv


@pytest.fixture(params=["asyncio", "trio"])
def both_backends(request):
    """A module runs on both anyio backends with ``anyio_backend = both_backends``."""
    return request.param


@pytest.fixture(params=["asyncio-taskgroup", "anyio-taskgroup"])
def spawner(request, monkeypatch, anyio_backend):
    """(Used by the gather tests.) Every test under each task group a concurrent pass
    can run its providers in: asyncio's (on asyncio) and anyio's (trio, Python 3.10)."""
    if anyio_backend == "trio" and request.param != "anyio-taskgroup":
        pytest.skip("trio runs every concurrent pass in anyio's task group")
    if request.param == "anyio-taskgroup":
        monkeypatch.setattr(gather_module, "on_asyncio", lambda: False)
    return request.param
