"""Airflow's side of the alerts: ``SesNotifier``, an Airflow notifier (a
``BaseNotifier``, the mechanism behind ``on_failure_callback``) that sends a failed task
of the nightly DAG through the project's own channels (``jobs.notify``: the profile's
webhooks, ``SES_ALERT_WEBHOOK``, email over SMTP), with the line to act on. What a task
itself finds (freshness, volume anomalies) its step sends as ``ses run`` does."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk.bases.notifier import BaseNotifier

from jobs.config import load_profile
from jobs.notify import ERROR, FAILURE, Alert, send


def failure_alert(context) -> Alert:
    """The alert of a failed task, from Airflow's callback context: the task (and its
    mapped group), the DAG run, the error's last line, and what to run."""
    ti = context.get("task_instance") or context.get("ti")
    dag_run = context.get("dag_run")
    dag_id = getattr(context.get("dag"), "dag_id", None) or getattr(ti, "dag_id", "ses_nightly")
    task = getattr(ti, "task_id", "?")
    group = context.get("group_name") or getattr(ti, "rendered_map_index", None)
    subject = f"{dag_id}.{task}" + (f"[{group}]" if group else "")
    when = context.get("logical_date") or getattr(dag_run, "run_after", None)
    day = when.date().isoformat() if isinstance(when, datetime) else str(when or "")
    exc = context.get("exception")
    lines = [line for line in str(exc or "failed").splitlines() if line.strip()]
    message = next((line for line in reversed(lines) if line.startswith("error:")),
                   lines[-1] if lines else "failed")
    run_id = getattr(dag_run, "run_id", "") or ""
    return Alert(FAILURE, ERROR, subject, message[:1000], run_id, day,
                 action=f"fix the cause, then: airflow tasks clear {dag_id} -t {task} "
                        f"-s {day} -e {day} (or ses run --logical-date {day})",
                 details={"try_number": getattr(ti, "try_number", None),
                          "log_url": getattr(ti, "log_url", None)})


class SesNotifier(BaseNotifier):
    """``on_failure_callback=SesNotifier()``: one alert per failed task."""

    template_fields = ()

    def __init__(self, profile: str | None = None):
        super().__init__()
        self.profile = profile

    def notify(self, context) -> None:
        alert = failure_alert(context)
        send([alert], load_profile(self.profile).alerts, echo=self.log.warning)
