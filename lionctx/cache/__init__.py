"""Cache backends for the caching providers: in-process (default) or Redis-shared.
``RedisCache`` needs the ``redis`` extra (``pip install 'lionctx[redis]'``), imported on
first use.
"""

from __future__ import annotations

from ..providers._base import CountedText, known_token_count, provided
from ._base import TEXT_CODEC, BoundCache, CacheBackend, Codec, InProcessCache, resolve_cache
from ._redis_cache import RedisCache

__all__ = ["TEXT_CODEC", "BoundCache", "CacheBackend", "Codec", "CountedText",
           "InProcessCache", "RedisCache", "known_token_count", "provided", "resolve_cache"]


from .._public import publish  # noqa: E402  (after the exports it rewrites)

publish(globals())
