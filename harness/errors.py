"""One exception hierarchy for the agent loop and its policies."""


class HarnessError(Exception):
    """Base of the harness package; the message says what was wrong and what to do."""


class PolicyError(HarnessError):
    """The policy could not produce a turn (endpoint down, garbage output, model missing)."""


class ToolError(HarnessError):
    """A tool call was malformed or failed; becomes an observation the model can recover from."""
