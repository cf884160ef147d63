"""Errors that reach the user as one line and a non-zero exit, never as a traceback."""


class UsageError(Exception):
    """Bad input from the user: a missing file, a problem that does not import, a missing device."""
