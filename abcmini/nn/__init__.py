"""The library: positional schemes, attention biases (ABS windows, ABC line tables, ALiBi,
relative, FIRE), ABC's calibration and the two models, in plain PyTorch + einops. It imports
nothing else of abcmini, so it can be copied or imported into another model on its own
(docs/library.md).
"""


class InputError(ValueError):
    """Input the library cannot take (an unknown scheme, a position past a table's end): the
    command line reports it as one line, like the run layer's ``UserError``."""
