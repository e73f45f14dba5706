"""The error of a blend's input: a member that cannot be read, or members that do not belong together."""

__all__ = ["BlendInputError"]


class BlendInputError(ValueError):
    """A member that cannot be read, or members that do not belong together."""
