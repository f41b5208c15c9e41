"""One experiment-tracker run per TrainingJob, across its restarts.

With spec.monitoring.wandbProject the operator sets WANDB_PROJECT, WANDB_RUN_ID (derived from the
job, the same for every attempt) and WANDB_RESUME=allow: wandb.init() resumes the job's run. With
spec.monitoring.mlflowTrackingUri, rank 0 of the first attempt creates an MLflow run and reports its
id to the operator (POST $CONVOY_PROGRESS_URL/tracking), which records it in status.tracking and
gives later attempts MLFLOW_RUN_ID, so they log into the same run. mlflow and wandb are optional:
without them start_tracking does nothing for that tracker."""

from __future__ import annotations

import importlib
import json
import logging
import os
from typing import Any, Dict, Mapping, Optional

log = logging.getLogger("convoy")

ENV_HYPERPARAMETERS_FILE = "CONVOY_HYPERPARAMETERS_FILE"
ENV_MLFLOW_URI = "MLFLOW_TRACKING_URI"
ENV_MLFLOW_RUN = "MLFLOW_RUN_ID"
ENV_WANDB_PROJECT = "WANDB_PROJECT"
ENV_WANDB_RUN = "WANDB_RUN_ID"


class Tracking:
    """The runs start_tracking started: mlflow_run (mlflow.ActiveRun) and wandb_run (wandb's Run),
    None where that tracker is not configured or not installed, and url, the run's page."""

    def __init__(self) -> None:
        self.mlflow_run: Any = None
        self.wandb_run: Any = None
        self.url: Optional[str] = None

    @property
    def mlflow_run_id(self) -> Optional[str]:
        return self.mlflow_run.info.run_id if self.mlflow_run is not None else None


def hyperparameters(env: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """The job's spec.hyperparameters as the operator wrote them ($CONVOY_HYPERPARAMETERS_FILE), with
    additionalParams merged in; {} outside a Convoy pod."""
    env = os.environ if env is None else env
    path = env.get(ENV_HYPERPARAMETERS_FILE)
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        log.warning("convoy: reading the hyperparameters from %s: %s", path, e)
        return {}
    params = {k: v for k, v in data.items() if k != "additionalParams"}
    params.update(data.get("additionalParams") or {})
    return params


def _optional(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def start(reporter: Any, params: Optional[Mapping[str, Any]], env: Mapping[str, str]) -> Tracking:
    """start_tracking's work, for one Reporter."""
    t = Tracking()
    if params is None:
        params = hyperparameters(env)
    if env.get(ENV_MLFLOW_URI):
        _start_mlflow(t, params, env)
    if env.get(ENV_WANDB_PROJECT):
        _start_wandb(t, params, env)
    if t.mlflow_run is not None or t.url:
        body = {}
        if t.mlflow_run_id:
            body["mlflowRunId"] = t.mlflow_run_id
        if t.url:
            body["url"] = t.url
        reporter.tracking(body)
    return t


def _start_mlflow(t: Tracking, params: Mapping[str, Any], env: Mapping[str, str]) -> None:
    mlflow = _optional("mlflow")
    if mlflow is None:
        log.warning("convoy: %s is set but mlflow is not installed: not logging to MLflow", ENV_MLFLOW_URI)
        return
    try:
        resumed = env.get(ENV_MLFLOW_RUN) or None
        t.mlflow_run = mlflow.start_run(run_id=resumed)
        if not resumed and params:
            # A resumed run has them already; MLflow refuses changing a param's value.
            mlflow.log_params(dict(params))
        t.url = mlflow_run_url(env[ENV_MLFLOW_URI], t.mlflow_run.info.experiment_id, t.mlflow_run.info.run_id)
    except Exception:  # never into the training
        log.warning("convoy: starting the MLflow run failed", exc_info=True)


def _start_wandb(t: Tracking, params: Mapping[str, Any], env: Mapping[str, str]) -> None:
    wandb = _optional("wandb")
    if wandb is None:
        log.warning("convoy: %s is set but wandb is not installed: not logging to W&B", ENV_WANDB_PROJECT)
        return
    try:
        t.wandb_run = wandb.init(project=env[ENV_WANDB_PROJECT], id=env.get(ENV_WANDB_RUN) or None, resume="allow",
                                 config=dict(params))
        if not t.url:
            t.url = getattr(t.wandb_run, "url", None) or None
    except Exception:  # never into the training
        log.warning("convoy: starting the W&B run failed", exc_info=True)


def mlflow_run_url(tracking_uri: str, experiment_id: str, run_id: str) -> Optional[str]:
    """The run's page in the MLflow UI at an http(s) tracking URI; None for other stores (a file
    path, databricks)."""
    if not tracking_uri.startswith(("http://", "https://")):
        return None
    return "%s/#/experiments/%s/runs/%s" % (tracking_uri.rstrip("/"), experiment_id, run_id)
