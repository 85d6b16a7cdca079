"""A user's YAML file (a recipe, a sweep) read with bounds checked before it is parsed: a
regular file, at most ``max_bytes``, no aliases, nesting at most ``max_depth`` deep. The event
stream is read without recursion, so an alias bomb or a list 30,000 deep is one line, not
minutes and gigabytes."""

import os

import yaml

from abcmini.errors import UserError


def read_yaml(path: str, what: str, max_bytes: int, max_depth: int, error: type = UserError):
    """The document in ``path`` (``what`` names it in messages); every problem is one ``error``."""
    where = f"{what} {path!r}"
    if not os.path.exists(path):
        raise error(f"{where} does not exist")
    if not os.path.isfile(path):  # a FIFO or a device would block the read
        raise error(f"{where} is not a regular file")
    if os.path.getsize(path) > max_bytes:
        raise error(f"{where} is over {max_bytes // 1024} KiB; it holds a few fields")
    try:
        with open(path) as f:
            text = f.read(max_bytes + 1)
        depth = 0
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise error(f"{where} uses YAML aliases (*name); write each value out")
            depth += isinstance(event, yaml.CollectionStartEvent) - isinstance(
                event, yaml.CollectionEndEvent
            )
            if depth > max_depth:
                raise error(f"{where} nests lists or mappings over {max_depth} deep")
        return yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, RecursionError) as problem:
        raise error(f"{where} is unreadable ({type(problem).__name__})") from None
    except yaml.YAMLError as problem:
        raise error(f"{where} is not valid YAML ({str(problem).splitlines()[0]})") from None
