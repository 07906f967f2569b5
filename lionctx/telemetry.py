"""OpenTelemetry traces and metrics for provider passes (optional: ``lionctx[otel]``):
a ``lionctx.gather`` span per pass with a ``lionctx.provider`` child per provider, and
three metrics. Outside text is cut and scrubbed (:func:`scrub`); metric labels are a
bounded set. ``LIONCTX_OTEL=0`` or :func:`set_enabled` turns it off. See
``docs/telemetry.md``."""

from __future__ import annotations

import functools
import importlib.util
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from ._log import logger_for
from ._outcome import Status
from ._policy import check_limit

if TYPE_CHECKING:  # pragma: no cover
    from ._report import Report

__all__ = ["LABEL_CHARS", "MAX_LABEL_VALUES", "OVERFLOW_LABEL", "configure", "enabled",
           "live", "metric_label", "record_report", "scrub", "set_enabled"]

logger = logger_for(__name__)

_state: dict[str, Any] = {"enabled": None, "tracer": None, "instruments": None,
                          "tracer_provider": None, "meter_provider": None,
                          "max_labels": None, "live_until": None}

#: Default most distinct provider label values a process gives its metrics.
MAX_LABEL_VALUES = 100
#: The provider label of every name past :data:`MAX_LABEL_VALUES`.
OVERFLOW_LABEL = "_other"
#: Most characters of one label value.
LABEL_CHARS = 64
#: Most characters of a reason or an error message in a span.
MESSAGE_CHARS = 500
#: Most characters of a provider name or an exception type in a span.
NAME_CHARS = 200
#: While nothing listens, how long a "no" of :func:`live` stands (too dear to ask per pass).
LIVE_RECHECK_S = 1.0

# The label values handed out so far (at most the cap), and a memo name -> label.
_given: set[str] = set()
_label_of: dict[str, str] = {}
_labels_lock = threading.Lock()


def enabled() -> bool:
    """True when the OpenTelemetry API is installed and tracing was not turned off
    (decided once, without importing it)."""
    if _state["enabled"] is None:
        off = os.environ.get("LIONCTX_OTEL", "1").strip().lower() in ("0", "false", "off", "no")
        _state["enabled"] = not off and _installed()
    return bool(_state["enabled"])


def live() -> bool:
    """True when a pass should be recorded: :func:`enabled`, and providers were given to
    :func:`configure` or a global provider is not the no-op default (a global one set
    later is seen within :data:`LIVE_RECHECK_S`; once live, it stays live)."""
    if not enabled():
        return False
    if _state["tracer_provider"] is not None or _state["meter_provider"] is not None:
        return True
    until = _state["live_until"]
    if until is not None and (until is True or time.monotonic() < until):
        return until is True
    found = _global_live()
    _state["live_until"] = True if found else time.monotonic() + LIVE_RECHECK_S
    return found


def _global_live() -> bool:
    from opentelemetry import metrics, trace

    if not isinstance(trace.get_tracer_provider(),
                      (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return True
    return type(metrics.get_meter_provider()).__name__ not in _IDLE_METERS


_IDLE_METERS = frozenset(("_ProxyMeterProvider", "NoOpMeterProvider"))


def _installed() -> bool:
    try:  # imports the opentelemetry package only when it is there
        return importlib.util.find_spec("opentelemetry.trace") is not None
    except (ImportError, ValueError, AttributeError):  # absent, blocked or half-installed
        return False


def set_enabled(on: bool | None) -> None:
    """Turn tracing on or off for the process (``None``: decide again from the
    environment and what is installed)."""
    _state["enabled"] = None if on is None else bool(on)
    _state["live_until"] = None


def configure(*, tracer_provider: Any = None, meter_provider: Any = None,
              max_label_values: int | None = None) -> None:
    """Send spans and metrics to these providers instead of the global ones (``None``:
    the global one). ``max_label_values`` caps the distinct provider label values
    (default :data:`MAX_LABEL_VALUES`); the labels handed out so far are forgotten."""
    max_label_values = check_limit(max_label_values, "max_label_values")
    _state.update(tracer_provider=tracer_provider, meter_provider=meter_provider,
                  max_labels=max_label_values, tracer=None, instruments=None,
                  live_until=None)
    with _labels_lock:
        _given.clear()
        _label_of.clear()


def _otel() -> tuple[Any, Any]:
    """The tracer and the three instruments, built on the first recorded pass."""
    if _state["tracer"] is None:
        from opentelemetry import metrics, trace

        provider = _state["tracer_provider"] or trace.get_tracer_provider()
        meter = (_state["meter_provider"] or metrics.get_meter_provider()).get_meter("lionctx")
        _state["instruments"] = (
            meter.create_counter("lionctx.provider.outcomes", unit="{outcome}",
                                 description="Provider outcomes by provider and status"),
            meter.create_counter("lionctx.tokens.injected", unit="{token}",
                                 description="Tokens of injected blocks, by provider"),
            meter.create_histogram("lionctx.provider.duration", unit="ms",
                                   description="Provider call duration"),
        )
        _state["tracer"] = provider.get_tracer("lionctx")
    return _state["tracer"], _state["instruments"]


def scrub(text: object, limit: int = MESSAGE_CHARS) -> str:
    """``text`` in at most ``limit`` characters, without personal data or credentials.

    Cut first (only about ``limit`` characters are ever read), then scrubbed of URL
    user info, query strings and fragments, authorization values, ``key=value``
    secrets, e-mail addresses and key-like strings; a word across a cut is dropped.
    ``text`` may be any object: it is made text as a reason is (never raises).
    """
    if type(text) is str and len(text) <= _MEMO_CHARS:
        return _scrub_memo(text, limit)
    return _scrub(text, limit)


def _scrub(text: object, limit: int) -> str:
    from .providers._redact import scrub_bounded  # the one redaction module

    return scrub_bounded(text, limit)


# Names, types and reasons repeat from pass to pass: scrubbed once each.
_MEMO_CHARS = 2000
_scrub_memo = functools.lru_cache(maxsize=4096)(_scrub)


def _printable(text: str) -> str:
    """``text`` with each control, format or separator character as ``?``."""
    if text.isprintable() and text:
        return text
    return "".join(c if c.isprintable() else "?" for c in text) or "?"


def metric_label(name: object) -> str:
    """The provider label a metric gets for ``name``: scrubbed, printable, at most
    :data:`LABEL_CHARS` characters, and one of a bounded set of values per process
    (past the cap, :data:`OVERFLOW_LABEL`)."""
    key = name if type(name) is str and len(name) <= 4 * LABEL_CHARS else None
    if key is not None and (found := _label_of.get(key)) is not None:
        return found
    value = _printable(_scrub(name, LABEL_CHARS))
    cap = _state["max_labels"] or MAX_LABEL_VALUES
    with _labels_lock:
        if value not in _given:
            if len(_given) >= cap:
                value = OVERFLOW_LABEL
            else:
                _given.add(value)
        if key is not None and len(_label_of) < 4 * cap:  # the memo is bounded too
            _label_of[key] = value
    return value


_ERROR = (Status.FAILED, Status.TIMEOUT)


def record_report(face: str, report: Report, *, started_ns: int, concurrent: bool) -> None:
    """Record one finished pass as spans and metrics. Never raises: telemetry must
    not cost the turn."""
    try:
        _record(face, report, started_ns, concurrent)
    except Exception:
        logger.warning("could not record the pass in OpenTelemetry", exc_info=True)


def _record(face: str, report: Report, started_ns: int, concurrent: bool) -> None:
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, StatusCode
    from opentelemetry.trace import Status as OtelStatus

    outcomes = report.outcomes
    tracer, inst = _otel()
    ended = time.time_ns()
    attrs: dict[str, Any] = {"lionctx.face": face, "lionctx.providers": len(outcomes),
                             "lionctx.tokens.used": report.used_tokens,
                             "lionctx.concurrent": concurrent}
    if report.budget is not None:
        attrs["lionctx.budget"] = float(report.budget)
    if report.prefix_stable is not None:
        attrs["lionctx.prefix.stable"] = report.prefix_stable
    if (brk := report.cache_break) is not None:
        attrs["lionctx.cache_break.name"] = _printable(scrub(brk.name, NAME_CHARS))
        attrs["lionctx.cache_break.kind"] = brk.kind
    parent = tracer.start_span("lionctx.gather", kind=SpanKind.INTERNAL, attributes=attrs,
                               start_time=started_ns)
    parent_ctx = trace.set_span_in_context(parent)
    cursor = started_ns
    for o in outcomes:
        # A span starts at its own stamp, else where it ran: all at the pass start when
        # concurrent, one after another when sequential.
        start = o.started_ns if o.started_ns is not None else started_ns if concurrent else cursor
        cursor = start + int(o.duration_ms * 1e6)
        status = o.status.value
        a: dict[str, Any] = {"lionctx.provider.name": _printable(scrub(o.name, NAME_CHARS)),
                             "lionctx.provider.status": status,
                             "lionctx.provider.index": o.index,
                             "lionctx.provider.tokens": o.tokens,
                             "lionctx.provider.duration_ms": o.duration_ms}
        if o.status.name.startswith("SKIPPED"):
            a["lionctx.provider.skip_cause"] = (
                "circuit_open" if o.circuit == "open"
                else "duplicate" if (o.reason or "").startswith("duplicate of") else status)
        optional = {"reason": o.reason and scrub(o.reason), "circuit": o.circuit,
                    "digest": o.digest, "volatile": bool(o.volatile),
                    "degraded": o.degradation_reason and scrub(o.degradation_reason),
                    "cached": bool(o.cached)}
        a.update((f"lionctx.provider.{k}", v) for k, v in optional.items() if v)
        span = tracer.start_span("lionctx.provider", context=parent_ctx, kind=SpanKind.INTERNAL,
                                 attributes=a, start_time=start)
        if o.status in _ERROR:
            etype = scrub(o.error_type or (
                "TimeoutError" if o.status is Status.TIMEOUT else "Error"), NAME_CHARS)
            message = scrub(o.error or o.reason or status)
            span.add_event("exception", {"exception.type": etype, "exception.message": message})
            span.set_attribute("error.type", etype if o.status is Status.FAILED else "timeout")
            span.set_status(OtelStatus(StatusCode.ERROR, message))
        span.end(end_time=min(max(start, start + int(o.duration_ms * 1e6)), max(ended, start)))
        label = metric_label(o.name)
        labels = {"lionctx.provider.name": label, "lionctx.provider.status": status}
        inst[0].add(1, labels)
        if o.status is Status.FIRED:
            inst[1].add(o.tokens, {"lionctx.provider.name": label})
        if o.circuit != "open":
            inst[2].record(o.duration_ms, labels)
    if outcomes and all(o.status in _ERROR for o in outcomes):
        parent.set_status(OtelStatus(StatusCode.ERROR, "every provider failed"))
    parent.end(end_time=ended)
