"""lionctx inside a real LionAGI ``Branch`` (``pip install 'lionctx[lionagi]'``).

lionctx's built-in providers implement LionAGI's ``provide(branch, instruction)``, so
they register in a real ``lionagi.Branch`` as they are::

    branch = lionagi.Branch(system="You are helpful.", chat_model=model)
    branch.providers.register(SqliteContextProvider(...), priority=10)
    with lionctx.bind_run_context(user_id="u1", tenant_id="acme"):
        await branch.chat("Where is my order?")
    branch.last_context_report        # LionAGI's own report of the pass

What they get from LionAGI:

* the **query** is the instruction's text as LionAGI renders it for the model
  (guidance, instruction and context, in its YAML form; tool schemas and the response
  format left out), or its ``plain_content``; never ``str(instruction)``, which holds a
  fresh UUID and timestamp every turn;
* the **run context**: a LionAGI ``Branch`` has none (and refuses one), so providers
  read the one bound with :func:`lionctx.bind_run_context` around the turn.

A provider that only has ``fetch(query, ctx)`` (agentium style) gets a ``provide`` with
:func:`provider`. LionAGI counts tokens with tiktoken's ``o200k_base``, which tiktoken
downloads on first use; offline (or to skip the download) call
:func:`use_bundled_tokenizer` once, which seeds tiktoken's cache from lionctx's
bundled, hash-checked copy. Nothing here imports ``lionagi``.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

from .._adapters import call_fetch, provider_name, query_from_instruction, run_context_from_branch
from .._exceptions import InvalidType

__all__ = ["LionagiProvider", "instruction_text", "provider", "use_bundled_tokenizer"]

from .._log import logger_for

logger = logger_for(__name__)

#: Where tiktoken fetches o200k_base from; its cache file is named by this URL's sha1.
O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"


def use_bundled_tokenizer(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Seed tiktoken's cache with lionctx's bundled ``o200k_base``; return the file.

    The directory is ``cache_dir``, else ``$TIKTOKEN_CACHE_DIR``, else a
    ``lionctx-tiktoken`` folder in the temp directory; ``TIKTOKEN_CACHE_DIR`` is set
    to it, so tiktoken (and LionAGI's tokenizer) reads it instead of downloading.
    The file is written only when missing or not byte-identical (sha256-checked).
    Call it before the first token count of the process: tiktoken keeps an encoding
    once loaded.
    """
    from .._tokens import O200K_FILE, O200K_SHA256

    folder = Path(cache_dir or os.environ.get("TIKTOKEN_CACHE_DIR")
                  or Path(tempfile.gettempdir()) / "lionctx-tiktoken")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / hashlib.sha1(O200K_URL.encode()).hexdigest()
    if not (target.is_file()
            and hashlib.sha256(target.read_bytes()).hexdigest() == O200K_SHA256):
        raw = gzip.decompress(O200K_FILE.read_bytes())
        if hashlib.sha256(raw).hexdigest() != O200K_SHA256:
            raise RuntimeError(f"lionctx's bundled tokenizer data {O200K_FILE} is corrupt; "
                               "reinstall lionctx")
        partial = target.with_name(target.name + f".{os.getpid()}.tmp")
        partial.write_bytes(raw)
        os.replace(partial, target)  # atomic: a concurrent reader never sees half a file
        logger.debug("seeded tiktoken cache %s", target)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
    return target


def instruction_text(content: Any) -> str:
    """The text of a LionAGI ``InstructionContent``, rendered the way LionAGI renders it.

    ``plain_content`` when set; else the content with its tool schemas and response
    format removed (``with_updates``, LionAGI's own), rendered by LionAGI
    (``Guidance: ...`` / ``Instruction: ...`` / ``Context: ...`` as YAML). Image parts
    of a multimodal instruction are left out.
    """
    plain = getattr(content, "plain_content", None)
    if isinstance(plain, str) and plain:
        return plain
    with_updates = getattr(content, "with_updates", None)
    target = content
    if callable(with_updates):
        target = with_updates(tool_schemas=[], response_format=None)
    rendered = getattr(target, "rendered", None)
    if isinstance(rendered, str):
        return rendered
    if isinstance(rendered, list):  # text part first, then images
        return "\n".join(p["text"] for p in rendered
                         if isinstance(p, dict) and isinstance(p.get("text"), str))
    text = getattr(content, "instruction", None)
    return text if isinstance(text, str) else ""


class LionagiProvider:
    """LionAGI's ``provide(branch, instruction)`` over an agentium-style provider."""

    def __init__(self, inner: Any, name: str | None = None) -> None:
        if not callable(getattr(inner, "fetch", None)) and not callable(
                getattr(inner, "fetchContext", None)):
            raise InvalidType(f"provider: {inner!r} has no fetch(query, ctx) or "
                            f"fetchContext(query, ctx)")
        self.inner = inner
        self.name = provider_name(inner, name, agentium=True)

    @property
    def degradation_reason(self) -> Any:
        return getattr(self.inner, "degradation_reason", None)

    async def provide(self, branch: Any, instruction: Any) -> Any:
        """Call the wrapped provider with the instruction's text and the run context.

        Returns what the wrapped provider answers, as it is: text or ``None`` from
        a well-behaved one; the pass checks it (anything else fails that row).
        """
        return await call_fetch(self.inner, query_from_instruction(instruction),
                                run_context_from_branch(branch))


def provider(inner: Any, name: str | None = None) -> LionagiProvider:
    """Wrap a ``fetch(query, ctx)`` provider for ``lionagi.Branch.providers.register``."""
    return LionagiProvider(inner, name)
