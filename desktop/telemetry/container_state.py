"""Container names from the runtimes' own state files, for ``advisor.attribution.container_from_cgroup``.

Docker's ``containers/<id>/config.v2.json``, Podman's and CRI-O's ``<driver>-containers`` folders, rootful
and rootless (under the owner's home, from the user database): read, never asked of a daemon. Anything
missing or unreadable (Docker's files are root's) gives None, and the container is then named by its id
alone. ``desktop.telemetry.host`` hands ``RuntimeStateFiles(home_of=posix_home)`` to the pure parser.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from desktop.safeio import read_bounded

#: A runtime's state file is a few KiB; past this it is not one (bounded, non-blocking: safeio).
_MAX_STATE_BYTES = 1 << 20


def _read_json(path: Path) -> object:
    """A JSON state file, or None when it is missing, unreadable (Docker's are root's) or not JSON."""
    try:
        return json.loads(read_bounded(path, _MAX_STATE_BYTES).decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None


@dataclass(frozen=True)
class RuntimeStateFiles:
    """Container names from the runtimes' state files; anything unreadable gives None (then the id alone)."""

    docker_roots: tuple[Path, ...] = (Path("/var/lib/docker"),)
    podman_roots: tuple[Path, ...] = (Path("/var/lib/containers/storage"), Path("/run/containers/storage"))
    #: uid -> home folder (rootless storage lives there); None where no user database exists.
    home_of: Callable[[int], Path | None] | None = None

    def __call__(self, runtime: str, container_id: str, owner_uid: int | None) -> str | None:
        home = self.home_of(owner_uid) if (self.home_of is not None and owner_uid is not None) else None
        if runtime == "docker":
            roots = (*self.docker_roots, *((home / ".local/share/docker",) if home else ()))
            return self._docker(roots, container_id)
        if runtime in ("podman", "cri-o"):
            roots = (*((home / ".local/share/containers/storage",) if home else ()), *self.podman_roots)
            return self._podman(roots, container_id)
        return None

    @staticmethod
    def _docker(roots: Sequence[Path], container_id: str) -> str | None:
        for root in roots:
            config = _read_json(root / "containers" / container_id / "config.v2.json")
            if isinstance(config, dict) and isinstance(config.get("Name"), str) and config["Name"].strip("/"):
                return str(config["Name"]).strip("/")
        return None

    @staticmethod
    def _podman(roots: Sequence[Path], container_id: str) -> str | None:
        for root in roots:
            for driver in ("overlay", "vfs", "btrfs", "zfs"):
                folder = root / f"{driver}-containers"
                config = _read_json(folder / container_id / "userdata" / "config.json")
                annotations = config.get("annotations") if isinstance(config, dict) else None
                if isinstance(annotations, dict):
                    for key in ("io.kubernetes.cri-o.ContainerName", "io.kubernetes.container.name"):
                        if isinstance(annotations.get(key), str) and annotations[key]:
                            return str(annotations[key])
                listing = _read_json(folder / "containers.json")
                if isinstance(listing, list):
                    for entry in listing:
                        if isinstance(entry, dict) and entry.get("id") == container_id:
                            names = entry.get("names")
                            if isinstance(names, list) and names and isinstance(names[0], str):
                                return names[0]
        return None


def posix_home(uid: int) -> Path | None:
    """The home folder of ``uid`` from the user database (None on Windows or for an unknown uid)."""
    try:
        import pwd
    except ImportError:  # Windows
        return None
    try:
        return Path(pwd.getpwuid(uid).pw_dir)
    except KeyError:
        return None
