"""The core's error for a bad event (thesis §5.6: the scheduler and the jobs it runs talk
through a narrow API; an event the core cannot apply, such as a report for a task that
did not run, raises this instead of being guessed at)."""


class CoreError(ValueError):
    """A bad event: unknown job, duplicate id, a report for a task that did not run."""
