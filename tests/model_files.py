"""Editing a compact model file (``fold_<k>.zip``) as a crafted or damaged file would be: its header rewritten,
its booster swapped, the archive otherwise as qwkboost writes it."""

import json
import zipfile
from pathlib import Path


def members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {i.filename: zf.read(i) for i in zf.infolist()}


def write_members(path: Path, content: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in content.items():
            zf.writestr(name, data)


def edit_header(path: Path, edit) -> None:
    """Call ``edit`` on the header's JSON (a dict) and write it back; the booster stays as it was."""
    content = members(path)
    header = json.loads(content["model.json"])
    edit(header)
    content["model.json"] = json.dumps(header).encode()
    write_members(path, content)


def logged_model(client, run_id: str):
    """The servable model run ``run_id`` logged (not the external record of a blend's member)."""
    run = client.get_run(run_id)
    (model,) = [m for m in client.search_logged_models([run.info.experiment_id],
                                                       filter_string=f"source_run_id = '{run_id}'")
                if m.tags.get("mlflow.model.isExternal") != "true"]
    return model


def model_uri(client, run_id: str) -> str:
    """``models:/<id>`` of the servable model run ``run_id`` logged."""
    return f"models:/{logged_model(client, run_id).model_id}"


def logged_pipeline_files(client, run_id: str) -> set[str]:
    """The files of the pipeline MLflow holds for run ``run_id``, inside the model it logged (``pipeline/...``)."""
    model = logged_model(client, run_id)
    return {a.path.removeprefix("artifacts/") for a in client.list_logged_model_artifacts(model.model_id,
                                                                                       "artifacts/pipeline")}
