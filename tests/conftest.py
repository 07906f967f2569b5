import pytest


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def server():
    """The bundled OpenAI-compatible offline echo server on 127.0.0.1 (recording requests)."""
    from lionctx.testing import LocalOpenAIServer

    with LocalOpenAIServer() as srv:
        yield srv
