"""The task names, in a module without torch: the command line checks them before importing it."""

from abcmini.errors import UserError

TASKS = ("successor", "addition", "nx1", "parity", "parity_class")


def check_task(task: str) -> None:
    if task not in TASKS:
        raise UserError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
