"""Errors meant for users: the CLI prints their message (no traceback) and exits non-zero."""


class UserError(Exception):
    """A mistake or a condition the user can fix (bad file, bad option, busy port, full disk)."""

    exit_code = 2
