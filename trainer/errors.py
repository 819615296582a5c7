"""One exception hierarchy for the trainer package."""


class TrainerError(Exception):
    """Base of the trainer package; the message says what was wrong and what to do."""


class ConfigError(TrainerError):
    """A training setting or an argument combination is invalid; the message names the setting to change."""


def ray_cause(err: Exception) -> Exception:
    """The exception a Ray task raised, unwrapped from Ray's own."""
    return err.cause if isinstance(getattr(err, "cause", None), Exception) else err
