"""The lab's command lines: argparse under the project's rule for bad input, one line on stderr
naming the problem and exit code 2, never a docstring or a traceback (an abcmini error raised by
the run a script reads included)."""

import argparse
import sys

from abcmini.errors import UserError


class Parser(argparse.ArgumentParser):
    def error(self, message: str):
        sys.stderr.write(f"{self.prog}: {message} (see --help)\n")
        sys.exit(2)


def parser(doc: str) -> Parser:
    """A script's parser, its description the first paragraph of the script's docstring."""
    return Parser(description=doc.split("\n\n")[0])


def call(function, *args, **kwargs):
    """``function(*args, **kwargs)``, an abcmini error or an unreadable file as one line, exit 2."""
    try:
        return function(*args, **kwargs)
    except UserError as error:
        sys.stderr.write(f"error: {error}\n")
    except OSError as error:
        sys.stderr.write(f"error: {error.filename or ''}: {error.strerror or error}\n")
    sys.exit(2)
