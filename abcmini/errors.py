"""The one base class of errors a user can cause (bad input, an unusable file). The CLI turns
these, and only these, into one line and exit code 2; anything else is a bug and keeps its
traceback."""


class UserError(Exception):
    pass
