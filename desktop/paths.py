"""Where Rigscope keeps things: shipped resources, the config file and the history database."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "rigscope"


def _shipped(folder: str, name: str) -> Path:
    """``name`` in ``desktop/<folder>`` (an installed wheel) or ``<folder>/`` beside ``desktop/`` (a checkout)."""
    here = Path(__file__).resolve().parent
    for base in (here / folder, here.parent / folder):
        candidate = base / name
        if candidate.exists():
            return candidate
    return here.parent / folder / name


def resource_path(name: str) -> Path:
    """A file shipped in ``resources/`` (source checkout) or ``desktop/resources`` (wheel)."""
    return _shipped("resources", name)


def packaging_path(name: str) -> Path:
    """A file of ``packaging/`` (the desktop entry, metainfo, unit template, dashboard): ``desktop/packaging``
    in a wheel, ``packaging/`` beside ``desktop/`` in a source checkout; ``name`` is relative to it
    (``linux/rigscope.desktop``)."""
    return _shipped("packaging", name)


def config_dir() -> Path:
    override = os.environ.get("RIGSCOPE_CONFIG_DIR")
    return Path(override) if override else Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def data_dir() -> Path:
    override = os.environ.get("RIGSCOPE_DATA_DIR")
    return Path(override) if override else Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def state_dir() -> Path:
    """Small state that outlives a run (the firmware mode a `stress --per-mode` found, to put back after a crash)."""
    override = os.environ.get("RIGSCOPE_STATE_DIR")
    return Path(override) if override else Path(platformdirs.user_state_dir(APP_NAME, appauthor=False))


def runtime_dir() -> Path:
    """This user's folder for what lives only while processes run (the simulated loads they share):
    ``$RIGSCOPE_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/rigscope`` (private to the user, emptied at logout),
    else the app's state folder."""
    override = os.environ.get("RIGSCOPE_RUNTIME_DIR")
    if override:
        return Path(override)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and Path(xdg).is_dir():
        return Path(xdg) / APP_NAME
    return state_dir()


def config_file() -> Path:
    return config_dir() / "settings.toml"


def default_db_path() -> Path:
    """The history database the recorder writes and every command reads by default."""
    return data_dir() / "history.sqlite"


def demo_db_path() -> Path:
    """The separate, clearly labelled database that `rigscope demo` fills."""
    return data_dir() / "demo-history.sqlite"


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` and any missing parents, each readable by the user only (0700).

    A folder that already exists is never changed: ``--db /tmp/x.sqlite`` must not take the
    sticky bit and everyone's access away from /tmp, nor a shared folder's group access."""
    missing: list[Path] = []
    probe = path
    while not probe.is_dir():
        if probe.exists() or probe.is_symlink() or probe.parent == probe:
            break  # a file or a dangling link in the way: mkdir below says so
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:  # made by someone else meanwhile: theirs, not ours to change
            continue
        try:
            folder.chmod(0o700)  # mkdir's mode passes through the umask, which may have taken the owner's bits
        except OSError:  # e.g. a shared folder on Windows: permissions are not ours to set
            pass
    path.mkdir(parents=True, exist_ok=True)  # raises the OSError that explains a file in the way
    return path
