"""Who runs a GPU process: its command shortened for people, and the container or pod it runs in.

``short_command`` turns an argv into ``python train.py --cfg a.yaml``; ``container_from_cgroup``
reads ``/proc/PID/cgroup`` text (cgroup v1 and v2; Docker, Podman rootful and rootless,
containerd and CRI-O under Kubernetes) and names the container through a ``StateLookup`` it is
handed: ``desktop.telemetry.container_state.RuntimeStateFiles`` reads the runtime's own state
files, never asking a daemon. Both are pure (text in, names out), so they are tested on fixtures;
``desktop.telemetry.host`` calls them once per process.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Final, Literal

#: Longest command shown; a longer one is cut at a word with an ellipsis.
MAX_COMMAND_CHARS: Final = 80
ELLIPSIS: Final = "…"

_PYTHON = re.compile(r"^(python|pythonw|pypy)(\d+(\.\d+)*)?[mwdu]*$|^py$", re.IGNORECASE)
# Interpreter options that take the next argument as their value (python -X opt, -W arg).
_PY_OPTIONS_WITH_VALUE: Final = frozenset({"-X", "-W", "--check-hash-based-pycs"})
# Launchers whose own first argument is a verb worth keeping (accelerate launch, deepspeed ...).
_BIN_DIRS: Final = frozenset({"bin", "scripts", "sbin"})


def _basename(token: str) -> str:
    """Last component of a POSIX or Windows path."""
    return re.split(r"[\\/]", token.rstrip("\\/"))[-1] or token


def _program(token: str) -> str:
    """``C:\\...\\python.exe`` -> ``python``; ``/opt/conda/envs/x/bin/python3.11`` -> ``python3.11``."""
    name = _basename(token)
    return name[:-4] if name.lower().endswith(".exe") else name


def _is_abs_path(token: str) -> bool:
    return token.startswith("/") or bool(re.match(r"^[A-Za-z]:[\\/]", token)) or token.startswith("\\\\")


def _short_arg(token: str) -> str:
    """An argument as shown: absolute paths by their last component, whitespace folded, quoted if spaced."""
    if "=" in token and token.startswith("-"):
        option, _, value = token.partition("=")
        return f"{option}={_short_arg(value)}" if value else token
    if _is_abs_path(token) and len(re.split(r"[\\/]", token.strip("\\/"))) > 1:
        token = _basename(token)
    token = " ".join(token.split())
    return f'"{token}"' if " " in token else token


def _python_rest(args: Sequence[str]) -> list[str]:
    """What follows ``python``: options dropped, ``-m module``/``-c …``/the script kept, with their arguments."""
    i = 0
    while i < len(args):
        token = args[i]
        if token == "-m" and i + 1 < len(args):
            return ["-m", *args[i + 1:]]
        if token.startswith("-m") and len(token) > 2:  # python -mtorch.distributed.run
            return ["-m", token[2:], *args[i + 1:]]
        if token == "-c":
            return ["-c", ELLIPSIS]
        if token == "-" or not token.startswith("-"):
            return list(args[i:])
        i += 2 if token in _PY_OPTIONS_WITH_VALUE else 1
    return []


def _entry_point(script: str) -> str | None:
    """A console script run by its interpreter (``/opt/conda/bin/torchrun``): its name, else None."""
    parts = re.split(r"[\\/]", script)
    name = _program(parts[-1])
    if len(parts) >= 2 and parts[-2].lower() in _BIN_DIRS and "." not in name:
        return name
    return None


def short_command(argv: Sequence[str], limit: int = MAX_COMMAND_CHARS) -> str | None:
    """The command line as people say it, or None for an empty one (a kernel thread, an unreadable one).

    Interpreter paths go (``/home/u/miniconda3/envs/llm/bin/python3.11 -u train.py`` is
    ``python train.py``); a console script run through its interpreter is named by itself
    (``torchrun``, ``accelerate launch``); absolute paths among the arguments keep their last
    component; past ``limit`` characters the line is cut at a word and ends in an ellipsis.
    """
    tokens = [t for t in argv if t]
    if not tokens:
        return None
    if len(tokens) == 1 and " " in tokens[0] and not _is_abs_path(tokens[0]):
        tokens = tokens[0].split()  # a process that rewrote its title ("ray::Worker idle")
    program = _program(tokens[0])
    rest = tokens[1:]
    if _PYTHON.match(program):
        rest = _python_rest(rest)
        program = "python"
        if rest and rest[0] not in ("-m", "-c"):
            entry = _entry_point(rest[0])
            if entry is not None:
                program, rest = entry, rest[1:]
    shown = [program, *(r if r in ("-m", "-c", ELLIPSIS) else _short_arg(r) for r in rest)]
    return _truncate(" ".join(shown), limit)


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 2:  # cut at a word when one ends in the second half
        cut = cut[:space]
    return cut.rstrip() + ELLIPSIS


# --- containers -----------------------------------------------------------------------------

#: The runtime a container's cgroup names ("k8s": a pod's cgroup without a container's).
ContainerRuntime = Literal["docker", "podman", "containerd", "cri-o", "k8s"]
#: (runtime, full container id, owner uid from the cgroup path or None) -> the container's name.
StateLookup = Callable[[ContainerRuntime, str, "int | None"], "str | None"]

_HEX_ID = r"[0-9a-f]{12,64}"
_SCOPE_PATTERNS: Final[tuple[tuple[re.Pattern[str], ContainerRuntime], ...]] = (
    (re.compile(rf"^docker-({_HEX_ID})\.scope$"), "docker"),
    (re.compile(rf"^libpod-(?:conmon-)?({_HEX_ID})(?:\.scope)?$"), "podman"),
    (re.compile(rf"^cri-containerd-({_HEX_ID})\.scope$"), "containerd"),
    (re.compile(rf"^crio-(?:conmon-)?({_HEX_ID})\.scope$"), "cri-o"),
)
_BARE_ID = re.compile(rf"^{_HEX_ID}$")
_POD_SLICE = re.compile(r"^kubepods(?:-[a-z]+)?-pod([0-9a-f_]{36})\.slice$")
_POD_DIR = re.compile(r"^pod([0-9a-f-]{36})$")
_USER_SERVICE = re.compile(r"^user@(\d+)\.service$")


@dataclass(frozen=True, slots=True)
class Container:
    """Where a process runs: a container (``runtime``: docker, podman, containerd, cri-o) and/or a pod."""

    runtime: ContainerRuntime
    container_id: str | None
    name: str | None = None
    #: The Kubernetes pod's uid (from the cgroup path), when it runs in one.
    pod_uid: str | None = None
    #: The user whose service manager owns it (rootless Podman/Docker), from ``user@UID.service``.
    owner_uid: int | None = None

    @property
    def short_id(self) -> str | None:
        return self.container_id[:12] if self.container_id else None

    @property
    def label(self) -> str:
        """``docker:trainer (3f2a9c1b4e5d)``, ``podman:3f2a9c1b4e5d``, ``k8s-pod:<uid>``."""
        if self.pod_uid is not None:
            return f"k8s-pod:{self.pod_uid}"
        if self.name:
            return f"{self.runtime}:{self.name} ({self.short_id})"
        return f"{self.runtime}:{self.short_id}"


def _parse_path(path: str) -> Container | None:
    runtime: ContainerRuntime | None = None
    container_id: str | None = None
    pod_uid: str | None = None
    owner_uid: int | None = None
    parent = ""
    in_kubepods = False
    for segment in PurePosixPath(path).parts[1:]:
        in_kubepods = in_kubepods or segment.startswith("kubepods")
        if (m := _USER_SERVICE.match(segment)) is not None:
            owner_uid = int(m.group(1))
        elif (m := _POD_SLICE.match(segment)) is not None:
            pod_uid = m.group(1).replace("_", "-")
        elif in_kubepods and (m := _POD_DIR.match(segment)) is not None:
            pod_uid = m.group(1)
        elif container_id is None:
            for pattern, name in _SCOPE_PATTERNS:
                if (m := pattern.match(segment)) is not None:
                    runtime, container_id = name, m.group(1)
                    break
            else:
                if _BARE_ID.match(segment) and (parent == "docker" or _POD_DIR.match(parent)):
                    runtime, container_id = ("docker" if parent == "docker" else "containerd"), segment
        parent = segment
    if container_id is None and pod_uid is None:
        return None
    return Container(runtime or "k8s", container_id, pod_uid=pod_uid, owner_uid=owner_uid)


def container_from_cgroup(text: str, state_lookup: StateLookup | None = None) -> Container | None:
    """The container of a process from its ``/proc/PID/cgroup`` text; None outside any.

    Every line is ``hierarchy:controllers:path``; the cgroup v2 line (``0::``) is read first, then
    the v1 lines. ``state_lookup`` names the container from the runtime's state files (None: id only).
    """
    lines = [line.split(":", 2) for line in text.splitlines() if line.count(":") >= 2]
    lines.sort(key=lambda parts: parts[0] != "0")
    for parts in lines:
        found = _parse_path(parts[2].strip())
        if found is None:
            continue
        if state_lookup is not None and found.container_id is not None:
            name = state_lookup(found.runtime, found.container_id, found.owner_uid)
            if name:
                found = Container(found.runtime, found.container_id, name, found.pod_uid, found.owner_uid)
        return found
    return None
