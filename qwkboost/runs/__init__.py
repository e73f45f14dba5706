"""Runs: one experiment (CV, cut points, outputs), the article's QWK table, Optuna tuning, Hydra sweeps and
peer models. Each takes a resolved config; ``experiments/*.py`` are their command lines.
"""

from qwkboost._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    # experiment
    "load_dataset": "experiment",
    "Evaluation": "experiment",
    "evaluate": "experiment",
    "run_experiment": "experiment",
    "check_against_data": "experiment",
    "prediction_tables": "experiment",
    "write_outputs": "experiment",
    # table
    "ARTICLE_TABLE": "table",
    "ARTICLE_PROTOCOL": "table",
    "COLUMNS": "table",
    "bayes_ceiling": "table",
    "matches_article": "table",
    "run_table": "table",
    "render": "table",
    # tuning
    "default_storage": "tuning",
    "suggest": "tuning",
    "check_space": "tuning",
    "check_space_against_engine": "tuning",
    "config_fingerprint": "tuning",
    "study_name": "tuning",
    "best_overrides": "tuning",
    "shown_url": "tuning",
    "TrialSeededSampler": "tuning",
    "open_storage": "tuning",
    "tune": "tuning",
    # sweep
    "MLflowSweepParent": "sweep",
    "PARENT_FILE": "sweep",
    "read_parent": "sweep",
    "sweep_shape": "sweep",
    "SUMMARY_METRICS": "sweep",
    # peers
    "PEERS": "peers",
    "PeerCV": "peers",
    "check_peer": "peers",
    "cross_validate_peer": "peers",
    "experiment": "",
    "table": "",
    "tuning": "",
    "sweep": "",
    "peers": "",
})
