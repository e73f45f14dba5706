"""The one rule that names qwkboost's columns beside yours, in every file qwkboost writes.

**Your columns keep their names** (your id, label, entity, weight and feature columns). A column of qwkboost's
own (``score``, ``class``, ``fold``, ``bias``, ``row``, ...) takes its plain name unless one of yours has it:
then it takes the suffix :data:`SUFFIX`, added again while the name is still taken. The prediction files apply it
through :class:`qwkboost.tracking.outputs.OutputColumns`, an explanation's table through
:meth:`qwkboost.explanations.explanation.Explanation.frame`.
"""

from __future__ import annotations

from typing import Callable, Iterable

__all__ = ["SUFFIX", "give_way"]

#: What qwkboost adds to the name of one of its columns that one of your columns already has.
SUFFIX = "_qwkboost"


def give_way(base: str, taken: set, forms: Callable[[str], Iterable[str]] | None = None) -> str:
    """The name of one of qwkboost's columns: ``base``, or ``base`` with :data:`SUFFIX` (again while needed), so
    that none of the columns it names is in ``taken``; those columns are then added to ``taken``.

    Parameters
    ----------
    base : str
        The plain name (``"score"``).
    taken : set of str
        The names in use: yours, and qwkboost's named so far.
    forms : callable, optional
        The columns a name stands for (``lambda b: [f"{b}@{o}" for o in outputs]`` for one per output);
        default the name itself.
    """
    forms = forms or (lambda b: [b])
    name = base
    while any(c in taken for c in forms(name)):
        name += SUFFIX
    taken.update(forms(name))
    return name
