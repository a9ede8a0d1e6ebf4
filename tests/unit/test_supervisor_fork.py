"""The supervisor forks its first children while it has no thread but its main one,
and starts a fresh interpreter otherwise (a thread running at the fork would be copied
mid-use): both paths exit with the status the child's run gave."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from django_jobqueue.worker.supervisor import EXIT_STOPPED, Supervisor

SPAWNED = "import sys; open(sys.argv[1], 'a').write('spawned\\n')"


def _supervisor(marks: Path) -> Supervisor:
    def forked(argv: list[str]) -> int:
        with open(argv[-1], "a") as out:
            out.write("forked\n")
        return EXIT_STOPPED

    argv = [sys.executable, "-c", SPAWNED, str(marks)]
    return Supervisor(argv=argv, count=2, shutdown_timeout=5, burst=True, run_forked=forked)


def test_with_another_thread_running_the_children_are_fresh_interpreters(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        _supervisor(marks).run()
    finally:
        release.set()
        other.join()
    assert marks.read_text().splitlines() == ["spawned", "spawned"]


def test_in_a_process_of_one_thread_the_first_children_are_forked(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    code = (
        "import sys, threading\n"
        "from pathlib import Path\n"
        "from tests.unit.test_supervisor_fork import _supervisor\n"
        "assert threading.active_count() == 1\n"
        "print(_supervisor(Path(sys.argv[1])).run())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(marks)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0", "a child was restarted"
    assert marks.read_text().splitlines() == ["forked", "forked"]
