"""The errors the package raises, matching the C ABI's statuses (c_api.h)."""

from . import _abi


class MlaverifyError(RuntimeError):
    """The library reported MLAV_ERROR: something failed that is neither the input nor a limit."""


class InvalidInput(ValueError):
    """Bad input (MLAV_INVALID_INPUT): the message names the field (and the file) at fault.

    A Python backend raises it for metadata that breaks docs/spec.md section 3."""


class Unsupported(Exception):
    """A case outside what a backend takes (MLAV_UNSUPPORTED); the suite counts it as a skip.

    A Python backend raises it from its callable (or its can_implement) to refuse a case."""


def raise_status(status, message):
    if status == _abi.INVALID_INPUT:
        raise InvalidInput(message)
    if status == _abi.UNSUPPORTED:
        raise Unsupported(message)
    raise MlaverifyError(message or f"status {status}")
