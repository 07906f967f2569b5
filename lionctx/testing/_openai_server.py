"""A small OpenAI-compatible chat server on 127.0.0.1: routing, auth, recorded requests,
the scripted-reply queue (answers and their encoding: :mod:`._openai_wire`)."""

from __future__ import annotations

import hmac
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

from .._exceptions import InvalidType, InvalidValue
from .._log import logger_for
from ..providers._base import check_count
from ..providers._redact import redact_query_strings
from . import _openai_wire as wire
from ._openai_wire import ECHO_LABEL, Reply, ScriptItem, echo_reply

__all__ = ["ECHO_LABEL", "JsonHandler", "LocalOpenAIServer", "RecordedRequest", "Reply",
           "ThreadedServer", "echo_reply"]

logger = logger_for(__name__)

_HOST = "127.0.0.1"
_MAX_BODY = 32 * 1024 * 1024
#: Header names whose values are credentials: never shown in a repr.
_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "api-key", "x-api-key",
                             "cookie", "set-cookie"})
_CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
_T = TypeVar("_T", bound="ThreadedServer")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: Any  # the ThreadedServer its handlers answer for


class ThreadedServer:
    """An HTTP server on 127.0.0.1 in a daemon thread; ``with`` starts and stops it."""

    handler: type[BaseHTTPRequestHandler]
    _port = 0
    _bound = 0  # the port bound last, still known after stop()
    _httpd: _Server | None = None
    _thread: threading.Thread | None = None

    def start(self: _T) -> _T:
        """Bind and serve in a daemon thread (once). Returns ``self``."""
        if self._httpd is None:
            self._httpd = httpd = _Server((_HOST, self._port), self.handler)
            httpd.owner, self._bound = self, httpd.server_address[1]
            self._thread = threading.Thread(
                target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True,
                name=f"lionctx-{type(self).__name__}-{httpd.server_address[1]}")
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self: _T) -> _T:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        if self._httpd is None:
            raise RuntimeError("server is not running; call start() first")
        return self._bound

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://{_HOST}:{self.port}"


class _Headers(dict[str, str]):
    """Received headers (lower-case names), whose repr masks credential values."""

    def __repr__(self) -> str:
        return repr({k: "***" if k.lower() in _SECRET_HEADERS else v for k, v in self.items()})


@dataclass
class RecordedRequest:
    """One request as the server received it (path without its query string).

    ``headers`` are kept in memory only, with lower-case names; they are left out of
    this object's repr, and their own repr masks credentials (``authorization``,
    ``x-api-key``...). Index them to read the real values.
    """

    method: str
    path: str
    body: Any
    headers: dict[str, str] = field(repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.headers, _Headers):
            self.headers = _Headers(self.headers)


class JsonHandler(BaseHTTPRequestHandler):
    """A :class:`ThreadedServer`'s handler that answers JSON and logs at debug level."""

    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        # The request line may carry a key in its query string (?api-key=...): drop it.
        safe = tuple(redact_query_strings(a) if isinstance(a, str) else a for a in args)
        logger_for(type(self).__module__).debug(
            f"{type(self.server.owner).__name__}: {format}", *safe)

    def send_json(self, status: int, payload: Any, indent: int | None = None) -> None:
        data = json.dumps(payload, indent=indent).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up: nothing to tell it
            logger.debug("client went away before the reply was written")


class _Handler(JsonHandler):
    server_version = "lionctx-local-openai/1"
    protocol_version = "HTTP/1.0"  # one request per connection: streaming ends at close

    def _recorded(self, body: Any, *, auth: bool = True) -> bool:
        """Record the request; False once a 401 has been sent (only when ``auth``)."""
        request = RecordedRequest(self.command, self.path.split("?", 1)[0], body,
                                  {k.lower(): v for k, v in self.headers.items()})
        if self.server.owner._record(request) or not auth:
            return True
        self.send_json(401, wire.error_body("invalid api key", "authentication_error"))
        return False

    def do_GET(self) -> None:  # noqa: N802
        path = self.path.split("?", 1)[0]
        if not self._recorded(None):
            return
        if path.rstrip("/") in ("/v1/models", "/models"):
            self.send_json(200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "lionctx"}
                for m in self.server.owner.models]})
        else:
            self.send_json(404, wire.error_body(f"no route for GET {path}"))

    def do_POST(self) -> None:  # noqa: N802
        path = self.path.split("?", 1)[0]
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= _MAX_BODY:
            self.send_json(400, wire.error_body("bad Content-Length"))
            return
        try:
            body = json.loads(self.rfile.read(length) or b"null")
        except ValueError:
            self._recorded(None, auth=False)
            self.send_json(400, wire.error_body("body is not valid JSON"))
            return
        if not self._recorded(body):
            return
        if path.rstrip("/") not in _CHAT_PATHS:
            self.send_json(404, wire.error_body(f"no route for POST {path}"))
        elif (problem := wire.check_chat_body(body)) is not None:
            self.send_json(400, wire.error_body(problem))
        else:
            try:
                self._answer(body)
            except (BrokenPipeError, ConnectionResetError):
                logger.debug("client went away before the reply was written")

    def _answer(self, body: dict[str, Any]) -> None:
        owner: LocalOpenAIServer = self.server.owner
        with owner._lock:
            item = owner._script.popleft() if owner._script else None
        try:
            reply = wire.reply_for(item, body)
        except Exception as exc:  # a broken script must show up in the test, as a 500
            logger.exception("scripted reply failed")
            self.send_json(500, wire.error_body(f"scripted reply failed: {exc}", "server_error"))
            return
        if reply.status != 200:
            kind = "authentication_error" if reply.status in (401, 403) else "server_error"
            self.send_json(reply.status, wire.error_body(reply.error or "error", kind))
            return
        calls = wire.tool_calls(reply, owner._next_id)
        plain = wire.completion(f"chatcmpl-{owner._next_id()}",
                                body.get("model") or owner.models[0], int(time.time()), reply,
                                calls, wire.usage(body, reply))
        if not body.get("stream"):
            self.send_json(200, plain)
            return
        opts = body.get("stream_options") or {}
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        chunks = wire.stream_chunks(plain, bool(opts.get("include_usage")))
        for event in [*map(json.dumps, chunks), "[DONE]"]:
            self.wfile.write(f"data: {event}\n\n".encode())
            self.wfile.flush()


class LocalOpenAIServer(ThreadedServer):
    """An OpenAI-compatible server on 127.0.0.1 in a background thread.

    It serves ``POST /v1/chat/completions`` (JSON, or server-sent events when
    ``stream`` is true) and ``GET /v1/models``, and records every request. By default
    it answers as an **offline echo model** (:func:`echo_reply`: no language model, a
    labelled text naming the ``<context name="...">`` blocks it saw); :meth:`script`
    queues exact replies, tool calls and errors. Usage counts are words, not tokens.

    ``port=0`` picks a free port. ``models``: the ids ``GET /v1/models`` lists (the first
    answers a request that names none). With ``api_key``, requests without
    ``Authorization: Bearer <api_key>`` get 401. ``max_records``: requests kept (oldest
    dropped first).

    ::

        with LocalOpenAIServer() as srv:
            model = OpenAIChatModel("any", base_url=srv.base_url)
            ...
            srv.requests[-1]["messages"]   # exactly what the client sent
    """

    handler = _Handler

    def __init__(self, *, port: int = 0, models: tuple[str, ...] = ("lionctx-echo",),
                 api_key: str | None = None, max_records: int = 10_000) -> None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise InvalidValue(f"port must be an int in 0..65535, got {port!r}")
        if not models or not all(isinstance(m, str) and m for m in models):
            raise InvalidValue(f"models must be non-empty str ids, got {models!r}")
        if api_key is not None and not isinstance(api_key, str):
            raise InvalidType(f"api_key must be a str or None, got {type(api_key).__name__}")
        max_records = check_count(max_records, "max_records", 1)
        self._port = port
        self.models = tuple(models)
        self._api_key = api_key
        self._lock = threading.Lock()
        self._script: deque[ScriptItem] = deque()
        self._received: deque[RecordedRequest] = deque(maxlen=max_records)
        self._next_id = itertools.count(1).__next__  # thread-safe: one C call

    def __repr__(self) -> str:
        where = self.base_url if self._httpd is not None else "stopped"
        return (f"LocalOpenAIServer({where}, models={list(self.models)!r}, "
                f"api_key={'set' if self._api_key else 'unset'})")

    @property
    def base_url(self) -> str:
        """The ``base_url`` for OpenAI clients: ``http://127.0.0.1:PORT/v1``."""
        return f"{self.url}/v1"

    def script(self, *replies: ScriptItem) -> LocalOpenAIServer:
        """Queue replies for the next chat requests, in order; echo resumes after.

        Each item is a :class:`Reply`, a str (text reply), a dict of Reply fields,
        or a callable that gets the request body and returns one of those.
        """
        for item in replies:
            if not (isinstance(item, (Reply, str, Mapping)) or callable(item)):
                raise InvalidType(f"cannot script {type(item).__name__}: {item!r}")
        with self._lock:
            self._script.extend(replies)
        return self

    @property
    def pending(self) -> int:
        """Scripted replies not used yet."""
        with self._lock:
            return len(self._script)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of every chat-completions request, oldest first."""
        with self._lock:
            return [r.body for r in self._received
                    if r.method == "POST" and r.path.endswith("/chat/completions")]

    @property
    def last_request(self) -> dict[str, Any]:
        """The most recent chat-completions body."""
        reqs = self.requests
        if not reqs:
            raise LookupError("no chat request received yet")
        return reqs[-1]

    @property
    def received(self) -> list[RecordedRequest]:
        """Every request received (any path), oldest first."""
        with self._lock:
            return list(self._received)

    def clear(self) -> None:
        """Forget recorded requests and queued replies."""
        with self._lock:
            self._received.clear()
            self._script.clear()

    def _record(self, req: RecordedRequest) -> bool:
        """Record ``req``; whether it is authorized."""
        with self._lock:
            self._received.append(req)
        if self._api_key is None:
            return True
        got = req.headers.get("authorization", "")
        return hmac.compare_digest(got.encode(), f"Bearer {self._api_key}".encode())
