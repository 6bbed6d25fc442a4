"""Alerts that reach a person: what broke, since when, and what to run. A night's alerts
go to every webhook (one JSON POST per alert: the profile's ``alerts.webhooks`` and
``SES_ALERT_WEBHOOK``) and, when ``alerts.email`` is set, as one email listing them all.
A night with nothing to say sends nothing. Delivery never fails the night: a target that
cannot be reached is reported in one line, and the other targets still get the alerts.
Standard library only (``urllib``, ``smtplib``); Airflow's notifier for the DAG wraps
``send`` (``jobs.ops.alerting``)."""

from __future__ import annotations

import json
import smtplib
import urllib.request
from dataclasses import asdict, dataclass, field
from email.message import EmailMessage
from urllib.parse import urlsplit

from jobs.config.profiles import AlertSettings
from jobs.progress import say

ERROR, WARNING = "error", "warning"
# the kinds of alert
FAILURE, FRESHNESS, ANOMALY, HELD = "failure", "freshness", "anomaly", "held_change"


@dataclass(frozen=True)
class Alert:
    """One thing a person must know: ``kind`` (failure, freshness, anomaly,
    held_change), ``severity`` (error, warning), the ``subject`` (a pattern, a source, a
    task), the run, one line ``message``, ``since`` (when it started, ISO, if known) and
    ``action`` (the command or step that mends it)."""

    kind: str
    severity: str
    subject: str
    message: str
    run_id: str = ""
    logical_date: str = ""
    since: str | None = None
    action: str | None = None
    details: dict = field(default_factory=dict)

    def line(self) -> str:
        since = f" (since {self.since})" if self.since else ""
        act = f" -> {self.action}" if self.action else ""
        return f"[{self.severity}] {self.kind} {self.subject}: {self.message}{since}{act}"

    def payload(self) -> dict:
        return {"source": "ses-pipeline", **asdict(self)}


def send(alerts: list[Alert], settings: AlertSettings, echo=say, timeout: float = 10.0
         ) -> dict[str, int]:
    """Send ``alerts`` to every target of ``settings``; {target: alerts delivered}. Nothing
    is sent for no alert."""
    delivered: dict[str, int] = {}
    if not alerts:
        return delivered
    for url in settings.targets:
        n = 0
        for alert in alerts:
            try:
                post_json(url, alert.payload(), timeout)
                n += 1
            except Exception as exc:  # noqa: BLE001 - delivery is reported, never fatal
                echo(f"warning: alert not delivered to {redact(url)}: {exc}")
                break
        delivered[redact(url)] = n
    if settings.email is not None:
        try:
            send_email(alerts, settings, timeout)
            delivered[f"smtp://{settings.email.host}:{settings.email.port}"] = len(alerts)
        except Exception as exc:  # noqa: BLE001 - delivery is reported, never fatal
            echo(f"warning: alert email not sent through {settings.email.host}:"
                 f"{settings.email.port}: {exc}")
    return delivered


def post_json(url: str, body: dict, timeout: float = 10.0) -> None:
    data = json.dumps(body, default=str).encode()
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json",
                                          "User-Agent": "ses-pipeline"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - the operator's URL
        if resp.status >= 300:
            raise OSError(f"HTTP {resp.status}")


def subject_line(alerts: list[Alert]) -> str:
    errors = sum(a.severity == ERROR for a in alerts)
    run = alerts[0].run_id
    head = f"{errors} error(s)" if errors else f"{len(alerts)} warning(s)"
    kinds = sorted({a.kind for a in alerts})
    return f"[ses] {head} in run {run}: {', '.join(kinds)}"


def email_body(alerts: list[Alert]) -> str:
    first = alerts[0]
    lines = [f"Run {first.run_id}" + (f" (logical date {first.logical_date})"
                                      if first.logical_date else ""), ""]
    for a in sorted(alerts, key=lambda a: (a.severity != ERROR, a.kind, a.subject)):
        lines.append(a.line())
    lines += ["", "The night's table: ses runs --run-id " + first.run_id]
    return "\n".join(lines)


def send_email(alerts: list[Alert], settings: AlertSettings, timeout: float = 10.0) -> None:
    e = settings.email
    msg = EmailMessage()
    msg["Subject"] = subject_line(alerts)
    msg["From"] = e.sender
    msg["To"] = ", ".join(e.to)
    msg.set_content(email_body(alerts))
    with smtplib.SMTP(e.host, e.port, timeout=timeout) as smtp:
        if e.starttls:
            smtp.starttls()
        if e.user:
            smtp.login(e.user, e.password or "")
        smtp.send_message(msg)


def redact(url: str) -> str:
    """A webhook URL without its secret parts (credentials, query, the path past its
    first segment: Slack's and Teams' URLs carry their token in the path)."""
    u = urlsplit(url)
    host = u.hostname or ""
    if u.port:
        host += f":{u.port}"
    first = u.path.strip("/").split("/")[0] if u.path.strip("/") else ""
    return f"{u.scheme}://{host}/{first}{'/…' if u.path.strip('/').count('/') else ''}"
