import pytest
from lionctx import _group as group_module


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


@pytest.fixture(params=["relay", "task-per-provider", "anyio-taskgroup"])
def spawner(request, monkeypatch, anyio_backend):
    """(Used by the gather tests.) Every test under each way a concurrent pass can run
    its providers: relay tasks (Python 3.11's default), a task per provider (3.12+,
    eagerly started there, and any pass with a limit), anyio's task group (trio,
    Python 3.10)."""
    if anyio_backend == "trio" and request.param != "anyio-taskgroup":
        pytest.skip("trio runs every concurrent pass in anyio's task group")
    if request.param == "anyio-taskgroup":
        monkeypatch.setattr(group_module, "_asyncio_taskgroup", lambda: None)
    else:
        monkeypatch.setattr(group_module, "_RELAY", request.param == "relay")
    return request.param
