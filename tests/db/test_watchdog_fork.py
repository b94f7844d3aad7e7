"""The statement watchdog in a forked child: it starts afresh there, on first use."""

from __future__ import annotations

import os
import threading

import pytest

from blendsql.db.watchdog import WATCHDOG


class Flag:
    def __init__(self) -> None:
        self.hit = threading.Event()

    def interrupt(self) -> None:
        self.hit.set()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_gets_its_own_watchdog_thread_that_fires() -> None:
    parent = WATCHDOG.arm(Flag(), 60)  # the parent's thread runs and holds a deadline
    try:
        pid = os.fork()
        if pid == 0:  # the child: the parent's thread is not here
            ok = False
            try:
                flag = Flag()
                WATCHDOG.arm(flag, 0.05)
                ok = flag.hit.wait(5)
            finally:
                os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    finally:
        WATCHDOG.disarm(parent)
    flag = Flag()
    ticket = WATCHDOG.arm(flag, 0.05)  # and the parent's watchdog still works
    assert flag.hit.wait(5)
    assert WATCHDOG.disarm(ticket)
