"""Errors a user can cause with a task file; the message is one sentence that says what to fix."""


class TaskError(ValueError):
    """A task file or task dictionary is malformed."""
