"""Before the window opens: will Qt's X11 (xcb) platform plugin load, and if not, which Debian packages it lacks.

On a fresh Debian/Ubuntu machine the PySide6 wheel's ``libqxcb.so`` needs libraries that are
not installed (libxcb-icccm4, libxcb-keysyms1, ...). Qt then aborts with "Could not load the
Qt platform plugin xcb" (often naming the wrong package). ``xcb_problem`` finds the missing
libraries the way the dynamic loader would (the plugin's DT_NEEDED entries, Qt's own libraries
through their RUNPATH, the system's through ``dlopen``) before the ``QApplication`` exists,
and says what to install.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import re
import struct
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

# Soname -> Debian/Ubuntu package, for every system library that libqxcb.so, libQt6XcbQpa,
# libQt6Gui, libQt6Core and libQt6DBus of the PySide6 6.x wheels load (`readelf -d`, and
# `dpkg -S` on Debian 12). The Makefile's XCB_PACKAGES installs the xcb-specific ones;
# tests/unit/ui/test_platform_check.py checks the two agree with the installed wheel.
DEBIAN_PACKAGES: dict[str, str] = {
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxcb-xinerama.so.0": "libxcb-xinerama0",  # Qt 5 and early Qt 6 builds
    "libxcb.so.1": "libxcb1",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libX11.so.6": "libx11-6",
    "libGL.so.1": "libgl1",
    "libEGL.so.1": "libegl1",
    "libglib-2.0.so.0": "libglib2.0-0",
    "libgthread-2.0.so.0": "libglib2.0-0",
    "libfontconfig.so.1": "libfontconfig1",
    "libfreetype.so.6": "libfreetype6",
    "libdbus-1.so.3": "libdbus-1-3",
    "libz.so.1": "zlib1g",
    "libzstd.so.1": "libzstd1",
}

_PT_LOAD, _PT_DYNAMIC = 1, 2
_DT_NULL, _DT_NEEDED, _DT_STRTAB, _DT_RPATH, _DT_RUNPATH = 0, 1, 5, 15, 29


def xcb_expected(env: Mapping[str, str], platform: str = sys.platform) -> bool:
    """Whether Qt would pick the xcb plugin: asked for by name, or the Linux default on an X display."""
    if not platform.startswith("linux"):
        return False
    requested = env.get("QT_QPA_PLATFORM", "").strip()
    if requested:  # "xcb", "xcb:option", "wayland;xcb": the first one is tried first
        return requested.split(";")[0].split(":")[0].strip() == "xcb"
    # Qt 6 prefers the wayland plugin in a Wayland session; its libraries are another matter.
    if env.get("WAYLAND_DISPLAY") or env.get("XDG_SESSION_TYPE") == "wayland":
        return False
    return bool(env.get("DISPLAY"))


#: Qt platform plugins that draw without a display server (tests, VNC, a framebuffer, a kiosk).
HEADLESS_PLATFORMS = frozenset({"offscreen", "minimal", "minimalegl", "vnc", "eglfs", "linuxfb", "vkkhrdisplay"})


def needs_display(env: Mapping[str, str], platform: str = sys.platform) -> bool:
    """Whether the window would meet no display: on Linux with neither DISPLAY nor WAYLAND_DISPLAY set and no
    display-less Qt plugin asked for (over SSH, on a headless server). Qt would abort there (exit 134, seven
    lines about plugins)."""
    if not platform.startswith("linux") or env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"):
        return False
    requested = env.get("QT_QPA_PLATFORM", "").strip()
    plugins = [p.split(":")[0].strip() for p in requested.split(";")] if requested else []
    return not any(p in HEADLESS_PLATFORMS for p in plugins)


def read_dynamic(path: Path) -> tuple[list[str], list[str]]:
    """(DT_NEEDED names, RUNPATH/RPATH entries) of an ELF shared object, read as the loader reads them."""
    # Mapped, not read: only the headers and the dynamic section are touched (ICU's data
    # library alone is 30 MB, and this runs before every window).
    with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return _parse_dynamic(path, data)


def _parse_dynamic(path: Path, data: mmap.mmap) -> tuple[list[str], list[str]]:
    if data[:4] != b"\x7fELF":
        raise ValueError(f"{path} is not an ELF file")
    is_64 = data[4] == 2
    end = "<" if data[5] == 1 else ">"
    if is_64:
        phoff, = struct.unpack_from(end + "Q", data, 32)
        phentsize, phnum = struct.unpack_from(end + "HH", data, 54)
        phdr, dyn = end + "IIQQQQQQ", end + "qQ"
    else:
        phoff, = struct.unpack_from(end + "I", data, 28)
        phentsize, phnum = struct.unpack_from(end + "HH", data, 42)
        phdr, dyn = end + "IIIIIIII", end + "iI"
    loads: list[tuple[int, int, int]] = []  # (vaddr, offset, filesz)
    dynamic: tuple[int, int] | None = None  # (offset, filesz)
    for i in range(phnum):
        fields = struct.unpack_from(phdr, data, phoff + i * phentsize)
        if is_64:
            p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = fields[:6]
        else:
            p_type, p_offset, p_vaddr, _paddr, p_filesz = fields[:5]
        if p_type == _PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == _PT_DYNAMIC:
            dynamic = (p_offset, p_filesz)
    if dynamic is None:
        return [], []
    entries: list[tuple[int, int]] = []
    step = struct.calcsize(dyn)
    for pos in range(dynamic[0], dynamic[0] + dynamic[1], step):
        tag, value = struct.unpack_from(dyn, data, pos)
        if tag == _DT_NULL:
            break
        entries.append((tag, value))
    strtab_vaddr = next((v for t, v in entries if t == _DT_STRTAB), None)
    if strtab_vaddr is None:
        return [], []
    # DT_STRTAB is a virtual address: the PT_LOAD segment that holds it gives its file offset.
    strtab = next((off + strtab_vaddr - va for va, off, size in loads if va <= strtab_vaddr < va + size), None)
    if strtab is None:
        raise ValueError(f"{path}: string table outside every loaded segment")

    def string(offset: int) -> str:
        start = strtab + offset
        end = data.find(b"\0", start)
        if end < 0:
            raise ValueError(f"{path}: unterminated string in the dynamic string table")
        return data[start:end].decode("utf-8", "replace")

    needed = [string(v) for t, v in entries if t == _DT_NEEDED]
    paths = [p for t, v in entries if t in (_DT_RUNPATH, _DT_RPATH) for p in string(v).split(":") if p]
    return needed, paths


def dlopen_missing(name: str) -> str | None:
    """None when the system library loads; else the name the loader could not find (maybe a dependency)."""
    try:
        ctypes.CDLL(name)
    except OSError as exc:
        found = re.match(r"(\S+?): cannot open shared object file", str(exc))
        return found.group(1) if found else name
    return None


def missing_libraries(plugin: Path, load: Callable[[str], str | None] | None = None) -> list[str]:
    """The shared libraries ``plugin`` needs that this machine lacks, in the order the loader meets them.

    Libraries found through a RUNPATH (Qt's own, shipped in the wheel) are read recursively;
    any other name is a system library and is tried with ``load`` (``dlopen`` by default),
    which also loads its dependencies, as Qt would a moment later.
    """
    try_load = load or dlopen_missing
    missing: list[str] = []
    seen: set[str] = set()

    def walk(path: Path) -> None:
        needed, runpath = read_dynamic(path)
        dirs = [Path(p.replace("$ORIGIN", str(path.parent)).replace("${ORIGIN}", str(path.parent))) for p in runpath]
        for name in needed:
            if name in seen:
                continue
            seen.add(name)
            bundled = next((d / name for d in dirs if (d / name).is_file()), None)
            if bundled is not None:
                walk(bundled)
            elif (lacking := try_load(name)) is not None and lacking not in missing:
                missing.append(lacking)

    walk(plugin)
    return missing


def xcb_plugin_candidates(env: Mapping[str, str]) -> list[Path]:
    """Where Qt looks for libqxcb.so: QT_QPA_PLATFORM_PLUGIN_PATH, then Qt's plugins folder."""
    from PySide6.QtCore import QLibraryInfo

    folders = [Path(env["QT_QPA_PLATFORM_PLUGIN_PATH"])] if env.get("QT_QPA_PLATFORM_PLUGIN_PATH") else []
    folders.append(Path(QLibraryInfo.path(QLibraryInfo.LibraryPath.PluginsPath)) / "platforms")
    return [folder / "libqxcb.so" for folder in folders if (folder / "libqxcb.so").is_file()]


def install_hint(missing: list[str]) -> str:
    """One line: what is missing and the apt-get command that installs it."""
    packages = list(dict.fromkeys(DEBIAN_PACKAGES[name] for name in missing if name in DEBIAN_PACKAGES))
    unknown = [name for name in missing if name not in DEBIAN_PACKAGES]
    text = (f"Qt's X11 platform plugin (xcb) cannot load: {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} missing.")
    if packages:
        text += f" Install with `sudo apt-get install {' '.join(packages)}`"
        text += f", and a package that provides {', '.join(unknown)}." if unknown else "."
    else:
        text += f" Install the package that provides {', '.join(unknown)}."
    return text


def xcb_problem(env: Mapping[str, str] | None = None, *, platform: str = sys.platform,
                find_missing: Callable[[], list[str]] | None = None) -> str | None:
    """The message to show instead of Qt's abort when the xcb plugin would not load; else None.

    ``find_missing`` replaces the look at this machine's libraries (tests inject a list).
    """
    env = os.environ if env is None else env
    if not xcb_expected(env, platform):
        return None
    if find_missing is None:
        def find_missing() -> list[str]:
            results = [missing_libraries(plugin) for plugin in xcb_plugin_candidates(env)]
            # Qt tries each folder in turn: one plugin that loads is enough. No plugin found: let Qt say so.
            return [] if not results or [] in results else results[0]
    try:
        missing = find_missing()
    except (OSError, ValueError, struct.error):  # an unreadable plugin: Qt's own message will be better
        return None
    return install_hint(missing) if missing else None
