"""Explanations: SHAP values and importances of a model, a run or a blend, in the objective's score space, on
every engine, and the ordinal view (which features move a row across which cut points).

- :mod:`~qwkboost.explanations.explanation`: ``explain``, ``Explanation``: values + bias = the raw score, every engine
- :mod:`~qwkboost.explanations.ordinal`: a row's walk across the cut points, a feature's dependence with them
- :mod:`~qwkboost.explanations.plots`: importance bars and the SHAP summary (beeswarm)
- :mod:`~qwkboost.explanations.report`: the files a run logs under ``explanations/``

The engines give their own TreeSHAP (:meth:`qwkboost.engines.base.Engine.contributions`); the native engine's
is :mod:`qwkboost.native.treeshap`.
"""

from qwkboost._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    # explanation
    "explain": "explanation",
    "Explanation": "explanation",
    "Ensemble": "explanation",
    "explain_model": "explanation",
    "explain_parts": "explanation",
    "model_contributions": "explanation",
    "sample_rows": "explanation",
    # ordinal
    "row_path": "ordinal",
    "plot_row": "ordinal",
    "plot_dependence": "ordinal",
    # plots
    "importance_bars": "plots",
    "beeswarm": "plots",
    # report
    "write_report": "report",
    "explanation": "",
    "ordinal": "",
    "plots": "",
    "report": "",
})
