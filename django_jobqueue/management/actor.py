"""Who acts, as the journal records it when an operator steers jobs from a shell."""

from __future__ import annotations

import getpass


def operator() -> str:
    """The command and the OS user running it."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name (e.g. a container's uid without a passwd entry)
        user = "unknown user"
    return f"manage.py jobqueue ({user})"
