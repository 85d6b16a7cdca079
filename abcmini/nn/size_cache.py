"""A value built once per size: biases and test draws are keyed on shapes, layout and device, and a
run meets only a few sizes (its training frames and one test), so a small bound keeps memory flat."""

LIMIT = 16  # the sizes of a run's training frames and of one test


def cached(store: dict, key: tuple, build):
    """``store[key]``, built by ``build()`` the first time; ``store`` is emptied when it holds ``LIMIT``."""
    if key not in store:
        if len(store) >= LIMIT:
            store.clear()
        store[key] = build()
    return store[key]
