"""Every exception lionctx defines, under one root ``LionctxError`` (the tree:
``docs/errors.md``). ``ConfigurationError`` is refused at the API boundary; second
bases (``ValueError``, ``TypeError``, ``RuntimeError``) are the built-ins callers
caught before the root existed. Imports nothing from lionctx at load time.
"""

from __future__ import annotations

__all__ = ["BodyTooLarge", "ConfigurationError", "DecodeError", "HttpFetchError",
           "InvalidType", "InvalidValue", "LionctxError", "ModelAuthError", "ModelConfigError",
           "ModelConnectionError", "ModelError", "ModelResponseError", "PluginLoadError",
           "SharedCacheError", "SharedFetchError", "SourceUnavailable", "TokenizerDataError",
           "UsageError", "WorkersExhausted"]


class LionctxError(Exception):
    """The root of every exception lionctx raises (see this module for the tree)."""


class ConfigurationError(LionctxError):
    """A value lionctx refused when it was given, before any provider ran; the message
    names the bad value."""


class InvalidValue(ConfigurationError, ValueError):
    """A value of the right type that is out of range (a negative timeout, a limit of 0)."""


class InvalidType(ConfigurationError, TypeError):
    """A value of the wrong type (``priority=None``, a string where seconds belong)."""


class UsageError(ConfigurationError):
    """A user mistake on the command line: printed as one line, exit status 2."""


class SourceUnavailable(LionctxError):
    """The source could not answer; the message is the reason, free of secrets.

    Reported as one ``failed`` row with this reason, logged without a traceback.
    ``scope`` tells the circuit breakers whose failure it is (``docs/breakers.md``):
    ``"user"`` (this call's user and tenant only), ``"source"`` (down for everyone)
    or ``None`` (decided from the run-context fields the provider reads).
    """

    SCOPES = ("user", "source")

    def __init__(self, *args: object, scope: str | None = None) -> None:
        if scope is not None and scope not in self.SCOPES:
            raise InvalidValue(f"scope must be 'user', 'source' or None, got {scope!r}")
        super().__init__(*args)
        self.scope = scope


class WorkersExhausted(SourceUnavailable):
    """No lionctx worker thread can be had: earlier calls are stuck in them.

    ``process_wide``: other sources hold the whole pool, so this one never ran; its
    row's ``blame`` is ``"overload"`` and no breaker counts it.
    """

    def __init__(self, *args: object, process_wide: bool = False) -> None:
        super().__init__(*args)
        self.process_wide = process_wide


class _CountStopped(LionctxError):
    """A count the turn gave up on stops at its next piece (in the abandoned thread)."""


class _CountRefused(LionctxError):
    """A text a turn may give up on has too long a stretch with no place to cut its
    count: one tokenizer call that could not be stopped (a failed row, this reason)."""


class HttpFetchError(SourceUnavailable):
    """Why one HTTP request got no text; the message is already free of secrets."""


class SharedFetchError(LionctxError):
    """The load another caller ran for the same key failed; ``original`` is its error."""

    def __init__(self, original: BaseException) -> None:
        from ._safe_text import error_text  # the load's error is a provider's: bounded

        super().__init__(": ".join(error_text(original)))
        self.original = original


class SharedCacheError(LionctxError):
    """Redis could not be used for this call; the message is the reason (no secrets)."""


class DecodeError(LionctxError):
    """The body cannot be decoded (an unknown or too deep encoding, corrupt data)."""


class BodyTooLarge(LionctxError):
    """The decoded body (or an intermediate layer of it) went over the cap."""


class PluginLoadError(LionctxError, RuntimeError):
    """A context-engine plugin could not be imported or produced no engine."""


class ModelError(LionctxError, RuntimeError):
    """A model call failed. Messages never carry the API key."""


class ModelConfigError(ModelError):
    """The adapter is not configured well enough to make a call (e.g. no API key)."""


class ModelConnectionError(ModelError):
    """The model server could not be reached, or did not answer in time."""


class ModelResponseError(ModelError):
    """The server answered with an error status or an unusable body."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class ModelAuthError(ModelResponseError):
    """The server refused the credentials (HTTP 401 or 403)."""


class TokenizerDataError(LionctxError, RuntimeError):
    """The bundled tokenizer data is missing or corrupt."""
