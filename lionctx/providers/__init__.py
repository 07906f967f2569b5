"""Built-in context providers: each serves both faces."""

from .base import ContextSource, ProvidedText

__all__ = ["ContextSource", "ProvidedText"]
