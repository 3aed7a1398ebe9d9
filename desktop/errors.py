"""Errors meant for users: the CLI prints their message (no traceback) and exits non-zero.

``EXIT_CODES`` is what each exit status of `rigscope` means, one thing each; `rigscope --help` prints it.
"""

#: Exit status -> its one meaning, for every command (`rigscope run` exits with its job's status instead).
EXIT_CODES: dict[int, str] = {
    0: "done (stress/analyze: the GPU held its speed)",
    1: "stress/analyze: throttled",
    2: "a usage error or bad input (one line on stderr says why; nothing recorded is lost)",
    3: "stress: wrong results found",
    4: "stress: aborted (temperature guard, Ctrl+C, SIGTERM, a crashed workload)",
    5: "stress --baseline: throughput below the baseline",
    6: "stress: finished, but its result could not be saved",
    7: "stress: inconclusive",
    8: "done in part: a change was written but is not in effect yet; stderr says the step left to you",
    130: "interrupted (Ctrl+C)",
}


class UserError(Exception):
    """A mistake or a condition the user can fix (bad file, bad option, busy port, full disk)."""

    exit_code = 2


class PartlyDone(UserError):
    """The change was made but does not take effect without a step from the user, which the message names
    (`rigscope service install` wrote the unit, but no `systemctl --user` answers here to enable it)."""

    exit_code = 8


def exit_codes_help() -> str:
    """The exit statuses as `rigscope --help` lists them."""
    return "exit status:\n" + "\n".join(f"  {code:<4} {meaning}" for code, meaning in EXIT_CODES.items())
