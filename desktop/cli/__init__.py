"""The `rigscope` command: no subcommand opens the window; subcommands do the same headless.

One module per subcommand (``desktop/cli/<name>.py``, ``import_`` for `import`), each with its
one-line ``HELP``, its options (``add_arguments(parser)``) and ``main(args) -> int``; the table
below names them and ``build_parser`` is a loop over it. Each module imports what ``main`` needs
inside its functions, so building the parser (`rigscope --version`, `--help`, the GUI start)
pays for no torch, numpy, sqlite or Qt (tests/unit/cli/test_parser.py checks it).
What they share is in ``common.py``. Conventions: every command that reads or writes history
takes ``--db PATH``; every command that prints results takes ``--json``; ``args.now_s`` is
"now" for every default that depends on the date. A ``UserError`` prints its message and
exits 2. Nothing outside this package imports it: it is the top layer.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import cast

from advisor.safetext import printable
from desktop import __version__
from desktop.cli.common import attach_relative_times, check_db_arg, drop_stdout
from desktop.errors import UserError, exit_codes_help

Handler = Callable[[argparse.Namespace], int]

#: subcommand -> the module under desktop.cli that runs it (its ``main(args)``).
COMMANDS: dict[str, str] = {
    "gui": "gui",
    "doctor": "doctor",
    "sample": "sample",
    "record": "record",
    "import": "import_",
    "export": "export",
    "serve": "serve",
    "demo": "demo",
    "stress": "stress",
    "analyze": "analyze",
    "advise": "advise",
    "report": "report",
    "service": "service",
    "menu": "menu",
    "completion": "completion",
    "run": "run",
    "jobs": "jobs",
    "compare": "compare",
    "usage": "usage",
    "fleet": "fleet",
}


def command_module(command: str) -> ModuleType:
    """The module under desktop.cli that runs ``command``, imported now (cheap: its heavy imports are in
    its functions, so building the parser costs no torch, numpy, sqlite or Qt)."""
    return importlib.import_module(f"{__name__}.{COMMANDS[command]}")


def build_parser() -> argparse.ArgumentParser:
    """`rigscope`'s parser: its own options, and per command a subparser that the command's module fills in
    (its ``HELP`` line and its ``add_arguments``)."""
    parser = argparse.ArgumentParser(
        prog="rigscope",
        description="Watch, stress-test and get advice for your GPU workstation. "
        "With no command, opens the window: `rigscope [--simulate[=PROFILES]] [--db PATH]` is `rigscope gui ...`.",
        epilog=exit_codes_help() + "\n  (`rigscope run` exits with its job's status instead)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"rigscope {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log more")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = command_module(name)
        help_text: str = module.HELP
        module.add_arguments(sub.add_parser(name, help=help_text, description=help_text))
    return parser


#: Options of `rigscope` itself (before any command); everything else belongs to a command.
_OWN_FLAGS = ("-v", "--verbose")
_OWN_EXITS = ("-h", "--help", "--version")


def with_default_command(argv: Sequence[str]) -> list[str]:
    """``rigscope``, ``rigscope --db PATH``, ``rigscope --simulate[=PROFILES]`` mean ``rigscope gui ...``:
    "gui" goes in before the first argument that is not `rigscope`'s own option, unless that is a
    command name (or something else: a mistyped command is still "invalid choice")."""
    out = list(argv)
    for i, token in enumerate(out):
        if token in _OWN_FLAGS:
            continue
        if token in _OWN_EXITS or not token.startswith("-"):
            return out
        out.insert(i, "gui")
        return out
    return [*out, "gui"]


def handler(command: str) -> Handler:
    """The ``main`` of ``command``'s module."""
    return cast(Handler, command_module(command).main)


def main(argv: Sequence[str] | None = None, *, now_s: float | None = None) -> int:
    """Run one command. ``now_s`` is "now" for every default that depends on it (the last full
    week, the last 24 h): tests pass a fixed instant so their expectations hold on any date."""
    parser = build_parser()
    given = with_default_command(attach_relative_times(argv if argv is not None else sys.argv[1:]))
    args = parser.parse_args(given)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    args.now_s = time.time() if now_s is None else now_s
    try:
        check_db_arg(args)
        return handler(args.command)(args)
    except UserError as exc:  # printable: a message may quote a lock file's pid and host, a file name, a value
        print(f"rigscope {args.command}: {printable(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `rigscope sample | head`: the reader has all it wanted
        drop_stdout()
        return 0
