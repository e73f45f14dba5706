"""Browse the runs: the MLflow UI on the project's store, with links that open on the runs.

    python experiments/ui.py [--port 5000] [--experiment qwkboost]      (make mlflow-ui)

MLflow's UI opens every experiment on its GenAI pages unless the link says
``workflowType=machine_learning`` (or "Model training" was clicked once in
that browser), so this prints links that do, then serves the UI on 127.0.0.1. The experiment's link opens its
runs table in qwkboost's starting view (the headline columns, best out-of-fold QWK first; the QWK charts first).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# first, before the slow imports: Ctrl-C or SIGTERM from here on is one line, never a traceback
from qwkboost.tracking.interrupt import main_guard, stop_quietly  # noqa: E402

if __name__ == "__main__":
    stop_quietly("experiments/ui.py")

import argparse  # noqa: E402
from pathlib import Path  # noqa: E402

from qwkboost import tracking  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=5000)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--experiment", default="qwkboost", help="experiment to link to (tracking.experiment_name)")
    ap.add_argument("--backend-store-uri", default=None, help="default: $MLFLOW_TRACKING_URI or <project>/mlflow.db")
    args = ap.parse_args()
    uri = tracking.resolve_tracking_uri(args.backend_store_uri)
    if not uri.startswith("sqlite:"):
        raise SystemExit(f"error: {uri} is not a local store; open that server's own UI instead")
    tracking.prepare_store(uri)
    base = f"http://{args.host}:{args.port}"
    print(f"MLflow UI for {uri.split('?')[0]}\n  all experiments: {tracking.ui_link(base)}")
    import mlflow

    client = mlflow.MlflowClient(uri)
    exp = client.get_experiment_by_name(args.experiment)
    if exp is not None:         # its runs table opens on the headline columns, best first
        tracking.store.ensure_runs_view(client, exp.experiment_id)
        print(f"  {args.experiment}: {tracking.ui_link(base, exp.experiment_id)}")
    sys.stdout.flush()
    mlflow_bin = Path(sys.executable).with_name("mlflow")
    os.execv(str(mlflow_bin), [str(mlflow_bin), "ui", "--backend-store-uri", uri.split("?")[0], "--host", args.host,
                               "--port", str(args.port)])


if __name__ == "__main__":
    with main_guard("experiments/ui.py", tracked=False):
        main()
