"""The one door to pynvml: start and stop NVML once, make calls, and sort their errors.

The only module that imports ``pynvml`` (lazily, so a machine without the bindings still starts
and tests hand in a fake module). ``NvmlGateway`` starts NVML once under its lock and shuts it
down at interpreter exit; ``call`` and ``device_call`` turn a call's error into ``MISSING``
(NotSupported & co.: remembered per device in a ``CallMemory`` and never asked again; a failing
sensor: asked again after ``FAILED_RETRY_S``) or into ``NvmlLost`` (the GPU itself is gone). It
also remembers the functions this driver or binding lacks, and hands out the C symbols that the
process-list code calls directly. What a call can come to and the code tables that decide it
are in outcomes.py; what each device's calls have taught, in call_memory.py.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from desktop.telemetry.backend import BackendUnavailable
from desktop.telemetry.nvml.call_memory import FAILED_RETRY_S, CallMemory
from desktop.telemetry.nvml.outcomes import (
    FUNCTION_NOT_FOUND,
    LOST_CODES,
    MISSING,
    MISSING_CODES,
    NO_SAMPLE_CODES,
    NO_SAMPLES,
    TRANSIENT_CODES,
    NvmlLost,
    error_code,
    reason_for_init_error,
)

log = logging.getLogger(__name__)


class _NoSuchError(Exception):
    """Stands in for ``NVMLError`` when handed a module without it (never raised)."""


def load_module() -> ModuleType:
    """The real ``pynvml``; ``BackendUnavailable`` when the bindings are not installed."""
    try:
        # Imported here, not at module level: a machine without the bindings still starts
        # (on the simulated GPU), and tests hand in a fake module instead.
        import pynvml
    except ImportError as exc:
        raise BackendUnavailable(
            "The NVML Python bindings are missing (pip package nvidia-ml-py, module pynvml): "
            f"{exc}") from exc
    module: ModuleType = pynvml
    return module


class NvmlGateway:
    """pynvml behind one lock: started once, shut down once, every call's error sorted."""

    def __init__(self, module: ModuleType, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._nvml = module
        self._monotonic = monotonic
        error_type = getattr(module, "NVMLError", None)
        self._error_type: type[BaseException] = (
            error_type if isinstance(error_type, type) and issubclass(error_type, BaseException) else _NoSuchError)
        #: Held by whoever talks to NVML (the backend holds it for a whole read), so that the
        #: shutdown at interpreter exit never runs in the middle of one.
        self.lock = threading.RLock()
        self._initialized = False
        self._closed = False
        self._unknown_functions: set[str] = set()

    # --- the NVML session -----------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def start(self) -> None:
        """``nvmlInit`` once; ``BackendUnavailable`` says why NVML cannot start."""
        with self.lock:
            if self._initialized:
                return
            try:
                self._nvml.nvmlInit()
            except Exception as exc:
                # Any failure here (NVMLError, a broken ctypes load, AttributeError on a stub
                # module) means "no NVML"; the user sees the reason, never a traceback.
                raise BackendUnavailable(
                    reason_for_init_error(error_code(exc), str(exc) or type(exc).__name__)) from exc
            self._initialized = True
            atexit.register(self.shutdown)

    def device_count(self) -> int:
        """How many GPUs NVML sees; ``BackendUnavailable`` when it cannot say."""
        try:
            return int(self._nvml.nvmlDeviceGetCount())
        except Exception as exc:
            raise BackendUnavailable(reason_for_init_error(error_code(exc), str(exc))) from exc

    def shutdown(self) -> None:
        """``nvmlShutdown`` (once); also runs at interpreter exit."""
        with self.lock:
            if self._closed or not self._initialized:
                self._closed = True
                return
            self._closed = True
            atexit.unregister(self.shutdown)
            try:
                self._nvml.nvmlShutdown()
            except Exception as exc:  # shutting down: nothing useful to do with an error
                log.debug("nvmlShutdown failed: %s", exc)

    def restart(self) -> None:
        """Renew a session that may be stale (every GPU lost: a driver reload, a reset)."""
        with self.lock:
            try:
                self._nvml.nvmlShutdown()
            except Exception as exc:
                log.debug("nvmlShutdown before re-init failed: %s", exc)
            self._initialized = False
            try:
                self._nvml.nvmlInit()
            except Exception as exc:
                log.warning("NVML could not be restarted: %s", exc)
                return
            self._initialized = True

    # --- what the binding offers --------------------------------------------------------

    def const(self, name: str, default: int) -> int:
        """An NVML constant (``NVML_CLOCK_SM``, ...): the binding's value, else the ABI's ``default``."""
        value = getattr(self._nvml, name, default)
        return value if isinstance(value, int) else default

    def binding_attr(self, name: str) -> Any:
        """A binding object that is not a call (``nvmlMemory_v2``, a ctypes struct), or None."""
        return getattr(self._nvml, name, None)

    @property
    def unknown_functions(self) -> frozenset[str]:
        """NVML functions this pynvml/driver lacks (for `doctor`)."""
        return frozenset(self._unknown_functions)

    # --- calls ------------------------------------------------------------------------

    def call(self, func: str, *args: Any, **kwargs: Any) -> Any:
        """A system-wide call (no device): its value, or MISSING whatever went wrong."""
        try:
            return self._invoke(None, func, func, args, kwargs)
        except NvmlLost:
            return MISSING

    def skips(self, memory: CallMemory, key: str) -> bool:
        """True when ``key`` is not asked now: unsupported, or failed less than FAILED_RETRY_S ago."""
        if key in memory.unsupported:
            return True
        entry = memory.failed.get(key)
        return entry is not None and 0.0 <= self._monotonic() - entry[0] < FAILED_RETRY_S

    def device_call(self, memory: CallMemory, key: str, func: str, *args: Any, **kwargs: Any) -> Any:
        """One call for a device: its value, or MISSING; raises ``NvmlLost`` for a fatal per-device error."""
        if self.skips(memory, key):
            return MISSING
        return self._invoke(memory, key, func, args, kwargs)

    def sampled_call(self, memory: CallMemory, key: str, func: str, *args: Any) -> Any:
        """``device_call`` for a call that reads the driver's sample buffer since a timestamp.

        There NOT_FOUND means "no sample newer than that" (nothing ran), not "not supported": it
        answers ``NO_SAMPLES`` and is asked again next time; NotSupported & co. are remembered as usual.
        """
        if self.skips(memory, key):
            return MISSING
        return self._invoke(memory, key, func, args, {}, empty_codes=NO_SAMPLE_CODES)

    def field_answered(self, memory: CallMemory, field_id: int, code: int) -> bool:
        """True when a field-values entry answered (return ``code`` 0); else its error is filed as a call's."""
        key = f"field:{field_id}"
        if code == 0:
            memory.failed.pop(key, None)
            return True
        if code in MISSING_CODES:
            memory.mark_unsupported(key)
        elif code in LOST_CODES:
            raise NvmlLost(f"field {field_id} answered NVML error {code}")
        elif code not in TRANSIENT_CODES:
            self._note_failed(memory, key, f"NVML error {code} (field {field_id})")
        return False

    def _invoke(self, memory: CallMemory | None, key: str, func: str, args: tuple[Any, ...],
                kwargs: dict[str, Any], *, empty_codes: frozenset[int] = frozenset()) -> Any:
        fn = getattr(self._nvml, func, None)
        if fn is None:
            self._note_unknown(func, memory, key)
            return MISSING
        try:
            value = fn(*args, **kwargs)
        except self._error_type as exc:
            if empty_codes and error_code(exc) in empty_codes:
                value = NO_SAMPLES
            else:
                return self._failure(memory, key, func, str(exc) or type(exc).__name__, exc)
        except (NotImplementedError, AttributeError) as exc:
            # pynvml raises NVMLLibraryMismatchError (not an NVMLError) for an unversioned
            # call the driver lacks; an AttributeError means a binding without the symbol.
            self._note_unknown(func, memory, key)
            log.debug("%s unavailable: %s", func, exc)
            return MISSING
        except Exception as exc:
            if type(exc).__name__ == "NVMLLibraryMismatchError":
                self._note_unknown(func, memory, key)
                return MISSING
            # A binding fault (a string that does not decode, a garbled struct), or an NVMLError
            # of a module whose class could not be matched: judged by its code where it has one.
            return self._failure(memory, key, func, f"{type(exc).__name__}: {exc}", exc)
        if memory is not None:
            memory.answered += 1
            if memory.failed.pop(key, None) is not None:
                log.info("%s: %s answers again", memory.label, func)
        return value

    def guarded(self, memory: CallMemory, key: str, func: str, run: Callable[[], Any]) -> Any:
        """``run()`` (a call made without the binding's wrapper), with its NVMLError sorted as a call's."""
        if self.skips(memory, key):
            return MISSING
        try:
            value = run()
        except self._error_type as exc:
            return self._failure(memory, key, func, str(exc) or type(exc).__name__, exc)
        memory.failed.pop(key, None)
        return value

    def _failure(self, memory: CallMemory | None, key: str, func: str, text: str, exc: BaseException) -> Any:
        """MISSING for an error that costs only this metric; raises ``NvmlLost`` for one that costs the GPU."""
        code = error_code(exc)
        if code == FUNCTION_NOT_FOUND:
            self._note_unknown(func, None, key)
        if code in MISSING_CODES:
            if memory is not None:
                memory.mark_unsupported(key)
            return MISSING
        if code in TRANSIENT_CODES:
            return MISSING
        if code in LOST_CODES:
            raise NvmlLost(f"{text} ({func})") from exc
        if memory is None:  # a system-wide call: its value is simply unknown
            log.debug("%s failed: %s", func, text)
            return MISSING
        self._note_failed(memory, key, f"{text} ({func})")
        return MISSING

    def _note_failed(self, memory: CallMemory, key: str, message: str) -> None:
        if key not in memory.failed:
            log.warning("%s: %s; that metric is n/a, asked again in %.0f s", memory.label, message, FAILED_RETRY_S)
        memory.failed[key] = (self._monotonic(), message)
        memory.errors.append(message)

    def _note_unknown(self, func: str, memory: CallMemory | None, key: str) -> None:
        if memory is not None:
            memory.mark_unsupported(key)
        if func not in self._unknown_functions:
            self._unknown_functions.add(func)
            # INFO, not WARNING: most have an older stand-in, and `doctor` lists the rest.
            log.info("NVML function %s is not available here (older driver or bindings): "
                     "using its older stand-in, or leaving its metric n/a", func)

    # --- C symbols (the process lists) ---------------------------------------------------

    def exports(self, symbol: str) -> bool | None:
        """Whether the driver exports C ``symbol``; None when it cannot be told (a fake, NVML not started)."""
        lookup = getattr(self._nvml, "_nvmlGetFunctionPointer", None)
        if not callable(lookup) or self._error_type is _NoSuchError:
            return None
        try:
            lookup(symbol)
        except self._error_type as exc:
            # FUNCTION_NOT_FOUND: the driver lacks it; anything else (not initialised): cannot tell.
            return False if error_code(exc) == FUNCTION_NOT_FOUND else None
        return True

    def c_function(self, symbol: str) -> Callable[..., int]:
        """The driver's C function ``symbol`` (raises NVMLError like pynvml when it has none)."""
        function: Callable[..., int] = self._nvml._nvmlGetFunctionPointer(symbol)
        return function

    def c_call(self, memory: CallMemory, key: str, symbol: str, *args: Any) -> Any:
        """The driver's C function ``symbol(*args)``, its out-parameters filled in place: True, or MISSING with
        its error sorted as a binding call's (``NvmlLost`` for a fatal one); None where no C symbol can be had
        (a binding without ``_nvmlGetFunctionPointer``): the caller uses the binding's wrapper instead.

        For the per-tick calls whose wrapper rebuilds what the caller can keep (the field-values request);
        the binding caches the function pointer.
        """
        if self.skips(memory, key):
            return MISSING
        if not callable(getattr(self._nvml, "_nvmlGetFunctionPointer", None)) or self._error_type is _NoSuchError:
            return None
        try:
            fn = self.c_function(symbol)
        except self._error_type as exc:
            if error_code(exc) != FUNCTION_NOT_FOUND:
                return self._failure(memory, key, symbol, str(exc) or type(exc).__name__, exc)
            return None  # this driver lacks the C symbol: the wrapper decides (and remembers) what it means
        try:
            ret = int(fn(*args))
        except Exception as exc:  # a ctypes fault in the call itself: contained like a binding fault
            return self._failure(memory, key, symbol, f"{type(exc).__name__}: {exc}", exc)
        if ret != 0:
            error = self.error(ret)
            return self._failure(memory, key, symbol, str(error) or type(error).__name__, error)
        memory.answered += 1
        if memory.failed.pop(key, None) is not None:
            log.info("%s: %s answers again", memory.label, symbol)
        return True

    def error(self, code: int) -> BaseException:
        """The binding's own NVMLError for a C function's return ``code`` (for ``guarded`` to sort)."""
        return self._error_type(code)
