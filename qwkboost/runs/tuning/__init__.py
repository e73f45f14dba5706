"""Tuning with Optuna: a study over ``engine.search_space``, stored in an RDB so a killed study resumes.

- :mod:`~qwkboost.runs.tuning.study`: ``tune``: the study, its trials as MLflow runs, the winner's honest figures;
  ``open_study``: a named study opened (or continued under an earlier name), its data checked, dead trials cleaned
- :mod:`~qwkboost.runs.tuning.space`: the search space checked, drawn from, and written as overrides
- :mod:`~qwkboost.runs.tuning.samplers`: samplers seeded per trial (TPE, Gaussian process, CMA-ES, random)
- :mod:`~qwkboost.runs.tuning.pruners`: a score after each CV fold (``fold_reporter``), and the pruners that read it
- :mod:`~qwkboost.runs.tuning.plots`: the study's plots and table of trials, for the parent MLflow run
- :mod:`~qwkboost.runs.tuning.storage`: the storage (SQLite, PostgreSQL), and trials a killed process left
- :mod:`~qwkboost.runs.tuning.on_dask`: trials side by side on a Dask cluster's workers
"""

from qwkboost._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    # study
    "tune": "study",
    "config_fingerprint": "study",
    "study_name": "study",
    "earlier_study_names": "study",
    "open_study": "study",
    "check_study_data": "study",
    "CONFIG_ATTR": "study",
    "DATA_ATTR": "study",
    # space
    "SPACE_TYPES": "space",
    "check_space": "space",
    "suggest": "space",
    "draw": "space",
    "best_overrides": "space",
    "check_space_against_engine": "space",
    # samplers
    "TrialSeededSampler": "samplers",
    "SAMPLERS": "samplers",
    "make_sampler": "samplers",
    # pruners
    "PRUNERS": "pruners",
    "make_pruner": "pruners",
    "FoldReporter": "pruners",
    "fold_reporter": "pruners",
    "stored_fold_reporter": "pruners",
    # plots
    "log_study": "plots",
    # storage
    "default_storage": "storage",
    "shown_url": "storage",
    "open_storage": "storage",
    "check_study_file": "storage",
    "on_the_scheduler": "storage",
    "scheduler_url": "storage",
    "write_back": "storage",
    "study": "",
    "space": "",
    "samplers": "",
    "pruners": "",
    "plots": "",
    "storage": "",
    "on_dask": "",
})
