"""What each GPU's NVML calls have taught so far: keys never asked again, keys resting after a failure.

The gateway (gateway.py) reads and writes one ``CallMemory`` per device: a key that answered
NotSupported & co. is never asked again; one that failed otherwise rests for ``FAILED_RETRY_S``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

#: A query that failed with an error that is neither "not supported" nor "lost" (UNKNOWN: a
#: sensor nvidia-smi shows as ERR!, OPERATING_SYSTEM, IRQ_ISSUE, a string that does not decode)
#: leaves that metric n/a and is asked again only after this long.
FAILED_RETRY_S: Final = 300.0


@dataclass(slots=True)
class CallMemory:
    """What one device's calls have taught so far, by call key ("fan", "field:185", ...).

    Kept per device (a GPU that lacks a fan says nothing about its neighbour) and read and
    written through ``NvmlGateway``: keys that answered NotSupported & co. are never asked
    again; keys that failed otherwise rest for ``FAILED_RETRY_S``.
    """

    #: How log lines name the device ("GPU 0").
    label: str
    unsupported: set[str] = field(default_factory=set)
    #: Keys that failed with neither "missing" nor "lost": (monotonic time, message).
    failed: dict[str, tuple[float, str]] = field(default_factory=dict)
    #: Queries answered, and errors met, in the current read: a read where all failed is a lost GPU.
    answered: int = 0
    errors: list[str] = field(default_factory=list)
    #: Bumped whenever ``unsupported`` changes, so what is derived from it can be kept until then.
    changes: int = 0

    def begin_read(self) -> None:
        self.answered, self.errors = 0, []

    def every_query_failed(self) -> bool:
        return bool(self.errors) and not self.answered

    def is_unsupported(self, key: str) -> bool:
        return key in self.unsupported

    def mark_unsupported(self, *keys: str) -> None:
        before = len(self.unsupported)
        self.unsupported.update(keys)
        if len(self.unsupported) != before:
            self.changes += 1

    def forget_unsupported(self, key: str | None = None) -> None:
        """Ask ``key`` (every key when None) again."""
        if key is None:
            self.unsupported.clear()
        else:
            self.unsupported.discard(key)
        self.changes += 1

    def failure(self, key: str) -> str | None:
        """The message of the last failure of ``key`` while it is remembered."""
        entry = self.failed.get(key)
        return entry[1] if entry is not None else None
