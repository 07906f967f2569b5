import pytest
from lionctx.engines import clear_registered_context_engine


@pytest.fixture(autouse=True)
def _no_registered_engine():
    clear_registered_context_engine()
    yield
    clear_registered_context_engine()
