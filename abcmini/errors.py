"""The one base class of errors a user can cause (bad input, an unusable file), a kind of the
library's ``InputError``. The CLI turns these, and only these, into one line and exit code 2; anything else is a bug and keeps its
traceback. ``Stopped`` is a stop signal (SIGTERM) raised where the program is, as Python raises
SIGINT's ``KeyboardInterrupt``."""

import signal
import threading
from contextlib import contextmanager

from abcmini.nn import InputError


class UserError(InputError):
    pass


class Stopped(BaseException):
    """The process was sent ``signum`` (SIGTERM: what ``wandb agent``, SLURM and ``timeout`` send).
    Not an ``Exception``: nothing that handles errors catches it, every ``with`` block unwinds."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # the shell's convention: 143 for SIGTERM


def raise_stopped(signum: int, frame) -> None:
    """A signal handler: ``Stopped`` where the main thread is."""
    raise Stopped(signum)


@contextmanager
def signals_held():
    """Inside, a stop signal waits for the block to end, then raises ``Stopped``: a wandb call cut
    in half leaves its service waiting for the rest of a message, and the run's finish hangs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = []
    numbers = [n for n in (signal.SIGTERM, signal.SIGINT) if signal.getsignal(n) is raise_stopped]
    for number in numbers:
        signal.signal(number, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        for number in numbers:
            signal.signal(number, raise_stopped)
    if held:
        raise Stopped(held[0])


def exit_code_of(error: BaseException | None) -> int:
    """The exit code a run ends with: 0, 143 for SIGTERM, 130 for SIGINT, 1 for any other error."""
    if error is None:
        return 0
    if isinstance(error, Stopped):
        return error.exit_code
    return 130 if isinstance(error, KeyboardInterrupt) else 1
