"""Alerts reach a person: one JSON POST per alert to a real HTTP server in the test, and
one email through a real SMTP server (aiosmtpd); a target that cannot be reached is one
line, and the others still get their alerts; nothing is sent when all is well."""

import json
import socket
import threading
from email import message_from_bytes, policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from jobs.config.profiles import AlertSettings, EmailSettings
from jobs.notify import ERROR, FAILURE, FRESHNESS, WARNING, Alert, redact, send


class _Hook(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append((self.path, self.headers["Content-Type"], json.loads(body)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def webhook():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    server.received = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def smtp_server():
    from aiosmtpd.controller import Controller

    class Inbox:
        def __init__(self):
            self.messages = []

        async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's name
            self.messages.append((envelope.mail_from, envelope.rcpt_tos,
                                  message_from_bytes(envelope.content, policy=policy.default)))
            return "250 OK"

    with socket.socket() as s:  # a free port (the controller checks it with a connection)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    inbox.port = port
    yield inbox
    controller.stop()


ALERTS = [
    Alert(FAILURE, ERROR, "sepsis_labs_then_antibiotics", "Spark lost an executor", "run-1",
          "2026-11-20", action="ses run --logical-date 2026-11-20"),
    Alert(FRESHNESS, WARNING, "hospital", "nothing new since 2026-11-17 09:00 UTC", "run-1",
          "2026-11-20", since="2026-11-17T09:00:00+00:00"),
]


def test_one_json_post_per_alert_to_the_environment_s_webhook(webhook, monkeypatch):
    url = f"http://127.0.0.1:{webhook.server_address[1]}/hooks/secret-token"
    monkeypatch.setenv("SES_ALERT_WEBHOOK", url)
    lines = []
    sent = send(ALERTS, AlertSettings(), lines.append)
    assert [p for p, _, _ in webhook.received] == ["/hooks/secret-token"] * 2
    assert {t for _, t, _ in webhook.received} == {"application/json"}
    first, second = (b for _, _, b in webhook.received)
    assert first["kind"] == "failure" and first["severity"] == "error"
    assert first["subject"] == "sepsis_labs_then_antibiotics" and first["run_id"] == "run-1"
    assert first["action"] == "ses run --logical-date 2026-11-20"
    assert second["since"] == "2026-11-17T09:00:00+00:00" and second["kind"] == "freshness"
    assert list(sent.values()) == [2] and "secret-token" not in next(iter(sent))
    assert not lines


def test_nothing_is_sent_when_all_is_well(webhook, monkeypatch):
    monkeypatch.setenv("SES_ALERT_WEBHOOK", f"http://127.0.0.1:{webhook.server_address[1]}/")
    assert send([], AlertSettings()) == {}
    assert webhook.received == []


def test_one_email_lists_the_night_s_alerts(smtp_server, webhook, monkeypatch):
    monkeypatch.delenv("SES_ALERT_WEBHOOK", raising=False)
    settings = AlertSettings(
        webhooks=("http://127.0.0.1:9/unreachable",),  # the discard port: refused
        email=EmailSettings(host="127.0.0.1", port=smtp_server.port, to=("oncall@example.org",),
                            sender="ses@example.org"))
    lines = []
    sent = send(ALERTS, settings, lines.append, timeout=3)
    assert len(smtp_server.messages) == 1  # one message, though a webhook failed
    sender, to, msg = smtp_server.messages[0]
    assert sender == "ses@example.org" and to == ["oncall@example.org"]
    assert msg["Subject"] == "[ses] 1 error(s) in run run-1: failure, freshness"
    body = msg.get_content()
    assert "[error] failure sepsis_labs_then_antibiotics: Spark lost an executor" in body
    assert "-> ses run --logical-date 2026-11-20" in body
    assert "(since 2026-11-17T09:00:00+00:00)" in body
    assert body.index("[error]") < body.index("[warning]")  # errors first
    assert "ses runs --run-id run-1" in body
    assert len(lines) == 1 and "alert not delivered to http://127.0.0.1:9/unreachable" in lines[0]
    assert sent["smtp://127.0.0.1:%d" % smtp_server.port] == 2


def test_a_webhook_url_is_shown_without_its_secret():
    assert redact("https://hooks.slack.com/services/T0/B0/XyZ?x=1") == \
        "https://hooks.slack.com/services/…"
    assert redact("http://user:pw@host:8080/alert") == "http://host:8080/alert"


class _TI:
    dag_id, task_id, try_number = "ses_nightly", "run_source", 1
    rendered_map_index = "sepsis"
    log_url = "http://localhost:8080/log"


class _DagRun:
    run_id = "scheduled__2026-11-20T02:00:00+00:00"


def test_airflow_s_notifier_sends_a_failed_task_with_the_line_to_act_on(webhook, monkeypatch):
    """The DAG's ``on_failure_callback``: Airflow's ``BaseNotifier``, called as Airflow
    calls it, with a callback context."""
    from datetime import datetime, timezone

    from jobs.ops.alerting import SesNotifier

    monkeypatch.setenv("SES_ALERT_WEBHOOK", f"http://127.0.0.1:{webhook.server_address[1]}/n")
    error = RuntimeError("run-patterns exited\nerror: freshness: source sepsis: nothing new "
                         "since 2026-11-12 06:00 UTC (an input error: not retried)")
    SesNotifier()({"task_instance": _TI(), "dag_run": _DagRun(), "exception": error,
                   "logical_date": datetime(2026, 11, 20, 2, tzinfo=timezone.utc)})
    [(path, _, alert)] = webhook.received
    assert path == "/n" and alert["kind"] == "failure" and alert["severity"] == "error"
    assert alert["subject"] == "ses_nightly.run_source[sepsis]"
    assert alert["message"].startswith("error: freshness: source sepsis: nothing new since")
    assert alert["run_id"] == "scheduled__2026-11-20T02:00:00+00:00"
    assert alert["action"].startswith("fix the cause, then: airflow tasks clear ses_nightly "
                                      "-t run_source -s 2026-11-20 -e 2026-11-20")
    assert alert["details"]["log_url"] == "http://localhost:8080/log"

