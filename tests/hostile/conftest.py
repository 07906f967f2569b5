"""Shared pieces for the attacks: a model on the bundled local server."""

import pytest

from lionctx import OpenAIChatModel, count_tokens


@pytest.fixture(autouse=True)
def _tokenizer_loaded():
    # The first count in a process loads the encoding (most of a second on a busy
    # machine): never inside an attack's wall clock.
    count_tokens("load the encoding before any wall clock starts")


@pytest.fixture
def model(server):
    return OpenAIChatModel("test-model", base_url=server.base_url, api_key="k", max_retries=0)


class Static:
    """A provider of both shapes that returns fixed text."""

    def __init__(self, name, text):
        self.name = name
        self.text = text

    async def provide(self, branch, instruction):
        return self.text

    async def fetch(self, query, ctx):
        return self.text
