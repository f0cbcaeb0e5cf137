"""Exceptions raised by fzmod. Every failure is an ``FzmodError`` carrying the library's
message; the subclasses also derive from the matching built-in so that ``except ValueError``
keeps working in code that does not know fzmod."""


class FzmodError(Exception):
    """Base class of every fzmod error."""


class InvalidArgument(FzmodError, ValueError):
    """An argument is out of range or inconsistent: dtype, shape, bound, preset, pipeline."""


class CorruptArchive(FzmodError, ValueError):
    """The bytes are not a valid fzmod archive (bad magic, truncated, checksum, version)."""


class BackendUnavailable(FzmodError, RuntimeError):
    """The requested backend or device path cannot run here (no GPU, no driver, no entry
    point for device arrays in this build)."""


class DeviceError(FzmodError, RuntimeError):
    """The GPU failed: out of memory, kernel compile or launch, copy."""


__all__ = ["FzmodError", "InvalidArgument", "CorruptArchive", "BackendUnavailable", "DeviceError"]
