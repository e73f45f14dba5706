"""Blending runs into one submission: members, methods, the fitted blend and its pipeline.

    >>> import qwkboost as qb
    >>> result = qb.blend(["outputs/2026-11-24/10-00-00", "outputs/2026-11-24/10-05-00"])  # doctest: +SKIP
    >>> result.metrics["nested_oof_qwk"]                                                   # doctest: +SKIP

:func:`blend` reads and checks the members (:mod:`~qwkboost.blending.members`),
fits the method (:mod:`~qwkboost.blending.methods`) in-sample and nested, and
returns a :class:`BlendResult`; :func:`write_blend` writes its submission and
files, :func:`log_blend` its MLflow run, and :class:`FittedBlend` scores new rows.
"""

from qwkboost.blending.fit import BlendResult, blend, log_blend, write_blend
from qwkboost.blending.members import BlendInputError, Member, align, read_members
from qwkboost.blending.methods import BLEND_METHODS, fit_weights, vote
from qwkboost.tracking.blend import FittedBlend

__all__ = ["blend", "BlendResult", "write_blend", "log_blend", "Member", "read_members", "align", "BlendInputError",
           "BLEND_METHODS", "fit_weights", "vote", "FittedBlend"]
