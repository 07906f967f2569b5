"""``SqliteContextProvider``: rows of one read-only query on a SQLite file. Parameters are
bound; the connection is read-only twice (``mode=ro``, an authorizer); the query runs in a
worker thread, interrupted when the turn gives up on it.
"""

from __future__ import annotations

import math
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from .._context import context_value, spellings
from .._exceptions import InvalidType, InvalidValue, SourceUnavailable
from .._outcome import NoText
from .._run import DEFAULT_MAX_CHARS
from .._threads import WorkersExhausted, run_in_worker
from ._base import ContextSource, check_count, check_duration, check_name, check_path
from ._identity import callable_identity, identity_of, name_from_path, secret_digest

__all__ = ["SqliteContextProvider", "format_rows"]

Row = dict[str, Any]
Formatter = Callable[[list[Row]], str | None]
Params = Mapping[str, Any] | Callable[[str, Any], Mapping[str, Any]] | None

# Bound on every call: parameter name -> run context field (None: the query).
_BUILTIN: dict[str, str | None] = {
    "query": None, **spellings("user_id", "tenant_id", "session_id", "run_id")}
# sqlite3's own default wait for a lock, kept when no timeout bounds the call.
_DEFAULT_BUSY = 5.0
# A parameter name, and a named parameter as SQLite reads one: :name, @name or $name.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PARAMETER = re.compile(r"[:@$](" + _NAME.pattern + ")")
_READ_ONLY_START = re.compile(r"^\s*(?:(?:--[^\n]*\n|/\*.*?\*/)\s*)*(select|with|values)\b",
                              re.IGNORECASE | re.DOTALL)
_ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ,
                              sqlite3.SQLITE_FUNCTION, getattr(sqlite3, "SQLITE_RECURSIVE", 33)})


def _is_busy(exc: sqlite3.Error) -> bool:
    if (code := getattr(exc, "sqlite_errorcode", None)) is not None:  # Python 3.11+
        return code & 0xFF in (sqlite3.SQLITE_BUSY, getattr(sqlite3, "SQLITE_LOCKED", 6))
    return "locked" in str(exc)


def _authorize(action: int, *_: Any) -> int:
    return sqlite3.SQLITE_OK if action in _ALLOWED_ACTIONS else sqlite3.SQLITE_DENY


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return str(value)


def format_rows(rows: list[Row]) -> str | None:
    """``column: value`` per line, rows separated by a blank line; ``None`` if no rows."""
    if not rows:
        return None
    return "\n\n".join("\n".join(f"{k}: {_show(v)}" for k, v in row.items()) for row in rows)


def _bindable(value: Any) -> Any:
    # A UUID, say: bind its text rather than fail the turn.
    return value if value is None or isinstance(value, (int, float, str, bytes)) else str(value)


def _identity(provider: SqliteContextProvider) -> tuple[str | None, tuple[str, ...]]:
    """The identity (none for a ``params`` function or stateful formatter), fields bound."""
    fields = tuple(sorted({str(_BUILTIN[key]) for key in provider._from_turn}))
    formatter = callable_identity(provider.formatter)
    if callable(provider.params) or formatter is None:
        return None, fields
    fixed = sorted((k, repr(v)) for k, v in (provider.params or {}).items())
    return identity_of("sqlite", provider.database, os.path.realpath(provider.database),
                       provider.sql, provider.max_rows, provider.max_chars, formatter,
                       secret_digest(fixed)), fields


@dataclass(slots=True)
class _Running:
    """The connection a worker thread is using, so a cancelled turn can interrupt it."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    conn: sqlite3.Connection | None = None
    cancelled: bool = False

    def interrupt(self) -> None:
        with self.lock:
            self.cancelled = True
            if self.conn is not None:
                self.conn.interrupt()


class SqliteContextProvider(ContextSource):
    """Rows of one read-only SQL query, with parameters bound from the turn.

    Each call binds ``:query`` (the user's input), ``:user_id``, ``:tenant_id``,
    ``:session_id`` and ``:run_id`` from the run context (also ``:userId``, ``:tenantId``,
    ``:sessionId``, ``:runId``), plus ``params``. No row gives ``None`` (``empty``, naming
    a run-context parameter used that had no value). A locked database fails with
    ``database is locked by another connection``.

    Args:
        database: Path of an existing SQLite file (never created or written).
        sql: One ``SELECT`` (or ``WITH`` / ``VALUES``) statement with named parameters.
        params: More parameters (not the built-in names): a mapping, or
            ``(query, ctx) -> mapping`` called on each turn.
        formatter: ``rows -> str | None``, rows as dicts (default :func:`format_rows`).
        max_rows: Rows read at most (default 20).
        max_chars: Most characters of values read (4,000,000; a value: bytes as stored);
            more fails the call, and no value over it is ever read (Python 3.11+).
        name: The name in reports and ``<context name="...">``; by default the file's
            name without its extension (``profile.db`` -> ``profile``), else ``sqlite``.
        busy_timeout: Seconds to wait for another connection's lock (``None``: nine
            tenths of the time left to the call's timeout or deadline, else 5 s).
    """

    def __init__(self, database: str | os.PathLike[str], sql: str, *, params: Params = None,
                 formatter: Formatter | None = None, max_rows: int = 20, name: str | None = None,
                 busy_timeout: float | None = None, max_chars: int = DEFAULT_MAX_CHARS) -> None:
        raw = check_path(database, "database")
        if raw == ":memory:":
            raise InvalidValue(f"database must be the path of a SQLite file, got {database!r}")
        if not isinstance(sql, str) or not sql.strip():
            raise InvalidValue(f"sql must be a non-empty str, got {sql!r}")
        if not _READ_ONLY_START.match(sql):
            raise InvalidValue("sql must be a single read-only query starting with SELECT, "
                             f"WITH or VALUES, got {sql[:60]!r}")
        if not sqlite3.complete_statement(sql.rstrip().rstrip(";") + ";"):
            raise InvalidValue(f"sql is not a complete statement: {sql[:60]!r}")
        if params is not None and not callable(params):
            if not isinstance(params, Mapping):
                raise InvalidType(f"params must be a mapping or a function of (query, ctx), "
                                f"got {params!r}")
            self._check_params(params)
        if formatter is not None and not callable(formatter):
            raise InvalidType(f"formatter must be callable or None, got {formatter!r}")
        self.max_rows = check_count(max_rows, "max_rows", 1)
        self.max_chars = check_count(max_chars, "max_chars", 1)
        self.busy_timeout = (None if busy_timeout is None else
                             check_duration(busy_timeout, "busy_timeout", allow_zero=True))
        self.database = str(Path(raw).absolute())
        self.name = check_name(name) if name is not None else name_from_path(
            self.database, fallback="sqlite", strip_suffix=True)
        self._uri = Path(self.database).as_uri() + "?mode=ro"
        self.sql = sql
        # The run-context parameters the SQL names, in the order they are bound.
        named = set(_PARAMETER.findall(sql))
        self._from_turn = [k for k, f in _BUILTIN.items() if f is not None and k in named]
        self.params = params
        self.formatter: Formatter = formatter or format_rows
        self.source_identity, self.context_fields = _identity(self)

    def __repr__(self) -> str:
        return f"SqliteContextProvider({self.database!r}, name={self.name!r})"

    @staticmethod
    def _check_params(params: Mapping[Any, Any]) -> None:
        for key in params:
            if not isinstance(key, str) or not _NAME.fullmatch(key):
                raise InvalidValue(f"params: {key!r} is not a valid parameter name")
            if key in _BUILTIN:
                raise InvalidValue(f"params: {key!r} is bound from the turn and cannot be "
                                 f"given here")

    def bindings(self, query: str, ctx: Any) -> dict[str, Any]:
        """The named parameters one call binds."""
        bind = {key: _bindable(query if field is None else context_value(ctx, field))
                for key, field in _BUILTIN.items()}
        extra = self.params(query, ctx) if callable(self.params) else self.params
        if extra:
            if not isinstance(extra, Mapping):
                raise InvalidType(f"params() returned {type(extra).__name__}, not a mapping")
            self._check_params(extra)
            bind.update({k: _bindable(v) for k, v in extra.items()})
        return bind

    async def retrieve(self, query: str, ctx: Any) -> str | None:
        """The formatted rows (``None``: none); a database error is ``SourceUnavailable``."""
        bind = self.bindings(query, ctx)
        running = _Running()
        busy = self._busy_seconds()
        try:
            # Stuck threads are capped per database file, whichever provider asks.
            rows = await run_in_worker(lambda: self._run(bind, running, busy),
                                       key=("sqlite", self.database))
        except anyio.get_cancelled_exc_class():
            running.interrupt()  # stop the statement the thread is still running
            raise
        except WorkersExhausted as exc:
            self._unavailable(str(exc))
            raise  # its own type: the row says the threads ran out, not the database
        except SourceUnavailable as exc:
            raise self._unavailable(str(exc)) from None
        self.last_error = None
        return self.formatter(rows) if rows else self._no_rows(bind)

    def _no_rows(self, bind: Mapping[str, Any]) -> NoText | None:
        """No rows: say which run-context parameter the query uses had no value."""
        unset = [key for key in self._from_turn if bind.get(key) is None]
        if not unset:
            return None
        fields = sorted({str(_BUILTIN[key]) for key in unset})
        return NoText(f"no rows; {', '.join(':' + k for k in unset)} had no value "
                      f"(the run context has no {' or '.join(fields)})")

    def _busy_seconds(self) -> float:
        """How long this call waits for a lock (see ``busy_timeout``)."""
        if self.busy_timeout is not None:
            return self.busy_timeout
        left = anyio.current_effective_deadline() - anyio.current_time()
        # Give up on the lock a little before the timeout, so the row says why.
        return _DEFAULT_BUSY if math.isinf(left) else max(0.0, left * 0.9)

    def _run(self, bind: dict[str, Any], running: _Running, busy: float) -> list[Row]:
        # sqlite3's messages never hold a bound value: they can be the reason as they are.
        try:
            conn = sqlite3.connect(self._uri, uri=True, isolation_level=None,
                                   check_same_thread=False, timeout=busy)
        except sqlite3.Error as exc:
            raise SourceUnavailable(f"cannot open {self.database}: {exc}") from None
        try:
            with running.lock:
                if running.cancelled:
                    return []
                running.conn = conn
            conn.set_authorizer(_authorize)
            if hasattr(conn, "setlimit"):  # SQLite refuses a longer value before reading it
                conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, self.max_chars)
            if (cur := conn.execute(self.sql, bind)).description is None:
                return []
            columns, rows, size = [d[0] for d in cur.description], [], 0
            for _, row in zip(range(self.max_rows), cur, strict=False):  # a row at a time
                size += sum(len(v) for v in row if isinstance(v, (str, bytes)))
                if size > self.max_chars:
                    raise sqlite3.DataError("values over the length limit")
                rows.append(dict(zip(columns, row, strict=False)))
            return rows
        except sqlite3.Error as exc:
            if _is_busy(exc):
                raise SourceUnavailable(f"database is locked by another connection (waited "
                                        f"{busy:.3g}s, busy_timeout)") from None
            if isinstance(exc, sqlite3.DataError):  # SQLite's "string or blob too big" too
                raise SourceUnavailable(f"rows are over max_chars ({self.max_chars:,})") from None
            raise SourceUnavailable(f"query failed: {type(exc).__name__}: {exc}") from None
        finally:
            with running.lock:
                running.conn = None
            conn.close()
