"""The configuration's error type."""


class ConfigError(ValueError):
    """A configuration a user must fix; the message is one line naming the key."""
