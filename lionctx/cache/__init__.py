"""Cache backends for the caching providers: in-process (default) or Redis-shared.
``RedisCache`` needs the ``redis`` extra (``pip install 'lionctx[redis]'``), imported on
first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..providers._base import CountedText, known_token_count, provided
from ._base import TEXT_CODEC, BoundCache, CacheBackend, Codec, InProcessCache, resolve_cache

if TYPE_CHECKING:  # pragma: no cover
    from ._redis_cache import RedisCache

__all__ = ["TEXT_CODEC", "BoundCache", "CacheBackend", "Codec", "CountedText",
           "InProcessCache", "RedisCache", "known_token_count", "provided", "resolve_cache"]


def __getattr__(name: str) -> Any:
    if name == "RedisCache":
        from ._redis_cache import RedisCache

        publish_one(RedisCache, name, __name__)
        return RedisCache
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)

from .._public import publish, publish_one  # noqa: E402  (after the exports it rewrites)

publish(globals())
