"""A fitted blend's pipeline, :class:`~qwkboost.tracking.blend.FittedBlend`, as :mod:`qwkboost.tracking.blend`
defines it (a run's saved pipeline, read by :func:`qwkboost.load_run`, below the blending stage that fits it); this
module gives its names where they were first imported from."""

from qwkboost.tracking.blend import BLEND_FORMAT, FittedBlend

__all__ = ["FittedBlend", "BLEND_FORMAT"]
