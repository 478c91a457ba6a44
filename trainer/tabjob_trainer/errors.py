"""Errors the trainer turns into one clear line instead of a traceback."""

from __future__ import annotations


class DataError(ValueError):
    """Bad input data; the message names the file and, where it applies, the column."""


class GPUUnavailableError(RuntimeError):
    """A fit asked for a GPU that does not work here and the spec says onGpuUnavailable: Fail."""


class NonFiniteError(ArithmeticError):
    """A fit produced NaN or infinite predictions or scores (it diverged): the fit fails, it is never scored."""
