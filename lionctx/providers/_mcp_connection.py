"""One MCP connection per server per event loop, shared by every provider and turn.

An MCP client session is an async context manager bound to the task that entered it
(its transport's task group and, for stdio, the child process live in that task's
scopes). So each connection has an *owner task* of its own: it enters the
``mcp.Client``, says it is ready, and waits until it is closed; readers from any task
send their requests through the open session and never enter or leave it.

* **Lazy, shared, initialized once.** The first read of a server starts its owner;
  every later read, from any provider or turn, uses the same session (a stdio
  server is one child process however many turns run). Concurrent reads share it.
* **Bounded.** A reader waits for the connection inside its own time bound (the
  provider's timeout, the pass deadline), so connecting counts against the read.
  The owner gives up connecting after ``connect_timeout`` on its own, so a server
  that never answers ``initialize`` holds nothing for longer than that.
* **Reconnected.** A read that finds the connection closed (the server exited, the
  stream dropped) discards it and is tried once more on a new session; a second
  failure is the read's failure. A connection that failed to open is forgotten, so
  the next read tries again.
* **Closed.** :func:`close_connections` closes every connection of the running event
  loop. When a loop ends (``asyncio.run`` returning), the loop cancels the owner
  tasks and each closes its session on the way out: a stdio child gets its stdin
  closed, then is terminated, never left running (the SDK's shutdown sequence).
  The owner task starts in an empty ``contextvars`` context, so no caller's bound
  run context lives on in it.
* **Notifications.** ``notifications/resources/updated`` reaches the callbacks
  registered with :meth:`Connection.on_updated`; every other notification costs one
  type check.

Only asyncio runs owner tasks (other event loops get a failure row saying so).
"""

from __future__ import annotations

import contextvars
import math
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from .._log import logger_for
from ._base import SourceUnavailable

if TYPE_CHECKING:  # pragma: no cover
    import asyncio

    from mcp import Client

__all__ = ["Connection", "Target", "close_connections", "connection_for", "live_connections"]

logger = logger_for(__name__)

#: Seconds the owner waits for a server to finish connecting and ``initialize``.
DEFAULT_CONNECT_TIMEOUT = 30.0
#: URIs one connection subscribes to at most; callbacks per URI at most.
MAX_WATCHED = 256
MAX_CALLBACKS = 64


@dataclass(frozen=True)
class Target:
    """How to reach one server: a key for the pool and a maker of a new client."""

    key: Hashable
    """Equal for every provider of the same server in this process."""
    label: str
    """The server as reasons and logs may show it (no secrets)."""
    make: Callable[[Callable[[Any], Any]], Client] | None
    """``make(message_handler)`` builds a new, unentered ``mcp.Client``; ``None`` for a
    client the caller holds (used as it is, never opened, closed or reconnected)."""
    held: Any = None
    """The caller's own entered ``mcp.Client`` when ``make`` is ``None``."""
    reconnects: bool = True
    """False for a transport object the caller passed: it can be entered only once."""


class Connection:
    """One server's session in this event loop (see the module docstring)."""

    def __init__(self, target: Target, connect_timeout: float) -> None:
        self.target = target
        self.connect_timeout = connect_timeout
        self._ready = anyio.Event()
        self._client: Client | None = None
        self._failure: str | None = None
        self._scope: anyio.CancelScope | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._updated: dict[str, list[Callable[[str], None]]] = {}
        self._watched: set[str] = set()
        self.listening: set[str] = set()  # URIs whose updates this session receives
        self._group: Any = None  # the owner's task group, for listeners
        self.updates = 0  # updated notifications received (tests read it)

    # -- readers ------------------------------------------------------------------------
    async def client(self) -> Client:
        """The open client, waiting for it to connect (inside the caller's time bound)."""
        await self._ready.wait()
        if self._client is None:
            raise SourceUnavailable(self._failure or "the MCP connection is closed")
        return self._client

    @property
    def open(self) -> bool:
        return self._client is not None and not self._closed

    def discard(self) -> None:
        """Stop using this connection (its owner closes it); the next read opens anew."""
        self._closed = True
        _forget(self)
        if self._scope is not None:
            self._scope.cancel()

    def on_updated(self, uri: str, callback: Callable[[str], None]) -> None:
        """Call ``callback(uri)`` when the server says ``uri`` was updated."""
        callbacks = self._updated.setdefault(uri, [])
        if callback not in callbacks and len(callbacks) < MAX_CALLBACKS:
            callbacks.append(callback)

    def watch(self, uri: str, callback: Callable[[str], None]) -> None:
        """Subscribe to ``uri``'s updates (once per connection) and call ``callback``.

        On a 2026-07-28 session this is a ``subscriptions/listen`` stream for the URI;
        on an older one, ``resources/subscribe`` when the server offers it. At most
        :data:`MAX_WATCHED` URIs per connection: past that, cached texts expire by
        their TTL alone.
        """
        if uri not in self._updated and len(self._updated) >= MAX_WATCHED:
            return  # past the cap: nothing is kept for it, not even a callback
        self.on_updated(uri, callback)
        if (uri in self._watched or len(self._watched) >= MAX_WATCHED
                or self._group is None or self._client is None):
            return
        self._watched.add(uri)
        self._group.start_soon(self._listen, self._client, uri)

    async def _listen(self, client: Client, uri: str) -> None:
        import warnings

        from mcp.client.subscriptions import ResourceUpdated
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        try:
            if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                async with client.listen(resource_subscriptions=[uri]) as subscription:
                    self.listening.add(uri)  # acknowledged: updates from now on arrive
                    async for event in subscription:
                        if isinstance(event, ResourceUpdated):
                            self._updated_uri(event.uri)
                return
            resources = client.server_capabilities.resources
            if resources is not None and resources.subscribe:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # deprecated only on newer sessions
                    await client.subscribe_resource(uri)
                self.listening.add(uri)
                return  # updates arrive as notifications (_on_message)
        except Exception as exc:  # a server that cannot subscribe: TTL alone then
            logger.debug("no update subscription for %s on %s: %s", uri, self.target.label,
                         _describe(exc))
        self._watched.discard(uri)
        self.listening.discard(uri)

    # -- the owner ----------------------------------------------------------------------
    def start(self) -> None:
        import asyncio  # only once a connection is made: importing lionctx stays light

        loop = asyncio.get_running_loop()
        # An empty context: the first reader's bound run context must not live on here.
        self._task = contextvars.Context().run(loop.create_task, self._own())

    async def _own(self) -> None:
        make = self.target.make
        assert make is not None
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                scope.deadline = anyio.current_time() + self.connect_timeout
                if self._closed:
                    scope.cancel()
                client = make(self._on_message)
                async with client, anyio.create_task_group() as group:
                    scope.deadline = math.inf  # connected: it stays open until closed
                    self._client = client
                    self._group = group
                    self._ready.set()
                    await anyio.sleep_forever()
            if self._client is None and not self._closed:
                self._failure = (f"the MCP server {self.target.label} did not finish "
                                 f"initialize within {self.connect_timeout:g}s")
        except Exception as exc:  # a failure to connect (or to close) is this server's
            self._failure = f"could not connect to the MCP server {self.target.label}: " \
                            f"{_describe(exc)}"
            logger.debug("MCP connection to %s ended", self.target.label, exc_info=True)
        finally:
            self._client = None
            self._group = None
            self._closed = True
            _forget(self)
            self._ready.set()

    async def _on_message(self, message: Any) -> None:
        # Called for every notification: one type check unless it is an update.
        method = getattr(message, "method", None)
        if method != "notifications/resources/updated":
            return
        uri = getattr(getattr(message, "params", None), "uri", None)
        if isinstance(uri, str):
            self._updated_uri(uri)

    def _updated_uri(self, uri: str) -> None:
        self.updates += 1
        for callback in tuple(self._updated.get(uri, ())):
            try:
                callback(uri)
            except Exception:  # one bad callback must not stop the session's reader
                logger.exception("resource-updated callback failed")

    async def aclose(self) -> None:
        """Close the session and wait for its owner (a stdio child is stopped)."""
        self.discard()
        task = self._task
        if task is not None and not task.done():
            import asyncio

            with anyio.CancelScope(shield=True):
                await asyncio.wait({task})


class _Held(Connection):
    """A client the caller entered and owns: used as it is, never closed here (and
    never subscribed through: its notifications are the caller's)."""

    def __init__(self, target: Target) -> None:
        super().__init__(target, 0.0)
        self._client = target.held
        self._ready.set()

    def start(self) -> None:  # nothing to own
        pass

    def discard(self) -> None:  # the caller's client stays the caller's
        pass

    async def aclose(self) -> None:
        pass


# loop -> {target key: connection}
_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Hashable, Connection]] = (
    weakref.WeakKeyDictionary())


def _loop() -> asyncio.AbstractEventLoop:
    import asyncio

    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise SourceUnavailable("MCP providers run on asyncio (no asyncio loop is "
                                "running)") from None


def connection_for(target: Target, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
                   ) -> Connection:
    """The live connection to ``target`` in this event loop, started if there is none."""
    if target.make is None:
        return _Held(target)
    pool = _POOLS.setdefault(_loop(), {})
    conn = pool.get(target.key)
    if conn is None or conn._closed:
        conn = Connection(target, connect_timeout)
        pool[target.key] = conn
        conn.start()
    return conn


def _forget(conn: Connection) -> None:
    for pool in list(_POOLS.values()):
        if pool.get(conn.target.key) is conn:
            del pool[conn.target.key]


def live_connections() -> list[Connection]:
    """The connections of the running event loop (open or opening)."""
    return list(_POOLS.get(_loop(), {}).values())


async def close_connections() -> None:
    """Close every MCP connection of the running event loop and wait for each."""
    for conn in live_connections():
        await conn.aclose()


def _describe(exc: BaseException) -> str:
    """An exception as a short reason: its type, and its message cut short."""
    inner = getattr(exc, "exceptions", None)  # an exception group: its first cause
    if isinstance(inner, tuple) and inner and isinstance(inner[0], BaseException):
        return _describe(inner[0])
    text = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
