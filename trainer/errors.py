"""One exception hierarchy for the trainer package."""


class TrainerError(Exception):
    """Base of the trainer package; the message says what was wrong and what to do."""


class ConfigError(TrainerError):
    """A training setting or an argument combination is invalid; the message names the setting to change."""
