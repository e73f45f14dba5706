"""Tracking: the MLflow store and its runs, interrupts (Ctrl-C, SIGTERM, killed processes), the fitted
pipeline a run saves, and the servable pyfunc model.

- :mod:`~qwkboost.tracking.store`: where runs go; the store created, migrated and checked; dead runs reaped
- :mod:`~qwkboost.tracking.runs`: runs always ended FINISHED, FAILED or KILLED; what a run logs
- :mod:`~qwkboost.tracking.interrupt`: signals and clean exits for the entry points
- :mod:`~qwkboost.tracking.outputs`: the prediction files' columns and the rule that names them
- :mod:`~qwkboost.tracking.pipeline`: ``FittedPipeline``: a run's fold models and cut points
- :mod:`~qwkboost.tracking.blend`: ``FittedBlend``: a blend's member pipelines, weights and cut points
- :mod:`~qwkboost.tracking.loading`: ``load_run``: a run's or a blend's pipeline, from disk or MLflow
- :mod:`~qwkboost.tracking.serving`: the MLflow ``pyfunc`` model of a pipeline
"""

from qwkboost._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    # store
    "PROJECT_ROOT": "store",
    "SQLITE_TIMEOUT_S": "store",
    "EXPERIMENT_KIND": "store",
    "EXPERIMENT_TAGS": "store",
    "PROCESS_TAG": "store",
    "HTTP_DEFAULTS": "store",
    "VERSIONED": "store",
    "default_tracking_uri": "store",
    "resolve_tracking_uri": "store",
    "check_sqlite_path": "store",
    "check_database_driver": "store",
    "retry": "store",
    "store_lock": "store",
    "CONCURRENT_MIGRATION": "store",
    "prepare_store": "store",
    "unreachable": "store",
    "check_reachable": "store",
    "cannot_reach": "store",
    "bound_http_retries": "store",
    "TrackingServerLost": "store",
    "server_lost": "store",
    "without_retries": "store",
    "setup": "store",
    "reap_dead_runs": "store",
    "mark_killed": "store",
    "STOPPED_TAG": "store",
    # runs
    "run": "runs",
    "download_run_artifacts": "runs",
    "download_pipeline": "runs",
    "fetch_pipeline": "runs",
    "flatten": "runs",
    "library_versions": "runs",
    "log_params": "runs",
    "version_tags": "runs",
    "log_datasets": "runs",
    "log_metrics": "runs",
    "log_curves": "runs",
    "log_dict": "runs",
    "log_figure": "runs",
    "log_file": "runs",
    "log_artifacts": "runs",
    "log_text": "runs",
    "set_tags": "runs",
    "MAX_RUN_NAME": "runs",
    "fit_run_name": "runs",
    "run_name": "runs",
    "ui_link": "runs",
    "run_link": "runs",
    "safe_name": "runs",
    "tmpdir": "runs",
    "command_line": "runs",
    "resolve_and_set": "runs",
    # interrupt
    "Terminated": "interrupt",
    "install_sigterm": "interrupt",
    "main_guard": "interrupt",
    "report_config_errors": "interrupt",
    "process_tag": "interrupt",
    "is_alive": "interrupt",
    "interrupted": "interrupt",
    # outputs
    "OutputColumns": "outputs",
    "read_predictions": "outputs",
    "write_predictions": "outputs",
    # pipeline
    "FittedPipeline": "pipeline",
    "FORMAT": "pipeline",
    # blend
    "FittedBlend": "blend",
    # loading
    "load_pipeline": "loading",
    "load_run": "loading",
    "PIPELINE_FILE": "pipeline",
    # serving
    "PipelineModel": "serving",
    "log_pyfunc": "serving",
    "log_member_models": "serving",
    "example_frame": "serving",
    "MODEL_NAME": "serving",
    "store": "",
    "runs": "",
    "interrupt": "",
    "outputs": "",
    "pipeline": "",
    "blend": "",
    "loading": "",
    "serving": "",
})
