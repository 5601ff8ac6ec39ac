"""A fake issue tracker on 127.0.0.1 for export tests: a real HTTP server that checks method,
path, auth header form and required fields as GitHub, GitLab, Jira Cloud, Linear and a signed
webhook document them, answers like them, and can inject 429/403/5xx answers and slowness."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOKEN = "tracker-token-123"
JIRA_EMAIL = "bot@example.com"
SECRET = "webhook-secret-456"


@dataclass
class Fault:
    """Answer the next matching request with ``status`` (and ``headers``), or after a pause."""

    path: str
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: str = ""
    pause: float = 0.0


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class Tracker:
    def __init__(self) -> None:
        self.issues: dict[str, dict[str, Any]] = {}  # key -> fields, per tracker prefix
        self.requests: list[Seen] = []
        self.faults: list[Fault] = []
        self.lock = threading.Lock()
        self.counter = 0

    def next_id(self) -> int:
        with self.lock:
            self.counter += 1
            return self.counter

    def fault_for(self, path: str) -> Fault | None:
        with self.lock:
            for index, fault in enumerate(self.faults):
                if path.startswith(fault.path):
                    return self.faults.pop(index)
        return None


def _handler(tracker: Tracker, base: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            return

        def _answer(
            self, status: int, body: Any = None, headers: dict[str, str] | None = None
        ) -> None:
            data = b"" if body is None else json.dumps(body).encode()
            try:
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                # the client gave up first (the timeout tests' pauses): nobody to answer
                return

        def _handle(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                self._answer(400, {"message": "body is not JSON"})
                return
            tracker.requests.append(Seen(self.command, self.path, dict(self.headers), body))
            fault = tracker.fault_for(self.path)
            if fault is not None:
                if fault.pause:
                    time.sleep(fault.pause)
                if fault.status:
                    self._answer(fault.status, {"message": fault.body or "injected"}, fault.headers)
                    return
            route = self.path.split("?")[0]
            for pattern, method, handle in ROUTES:
                match = re.fullmatch(pattern, route)
                if match and method == self.command:
                    status, answer, headers = handle(
                        self, tracker, base, body, raw, *match.groups()
                    )
                    self._answer(status, answer, headers)
                    return
            self._answer(404, {"message": f"no route {self.command} {route}"})

        do_GET = do_POST = do_PUT = do_PATCH = _handle  # noqa: N815  (http.server names)

    return Handler


Answer = tuple[int, Any, dict[str, str] | None]


def _github(
    h: Any, t: Tracker, base: str, body: Any, raw: bytes, repo: str, number: str | None = None
) -> Answer:
    if h.headers.get("Authorization") != f"Bearer {TOKEN}":
        return 401, {"message": "Bad credentials"}, None
    if h.headers.get("X-GitHub-Api-Version") != "2022-11-28":
        return 400, {"message": "missing API version"}, None
    if (
        not isinstance(body, dict)
        or not isinstance(body.get("title"), str)
        or not isinstance(body.get("labels"), list)
    ):
        return 422, {"message": "Validation Failed"}, None
    if number is None:
        number = str(t.next_id())
        t.issues[f"github:{repo}#{number}"] = body
        return 201, {"number": int(number), "html_url": f"{base}/{repo}/issues/{number}"}, None
    key = f"github:{repo}#{number}"
    if key not in t.issues:
        return 404, {"message": "Not Found"}, None
    t.issues[key] = body
    return 200, {"number": int(number), "html_url": f"{base}/{repo}/issues/{number}"}, None


def _gitlab(
    h: Any, t: Tracker, base: str, body: Any, raw: bytes, project: str, iid: str | None = None
) -> Answer:
    if h.headers.get("PRIVATE-TOKEN") != TOKEN:
        return 401, {"message": "401 Unauthorized"}, None
    if not isinstance(body, dict) or not isinstance(body.get("labels"), str) or "title" not in body:
        return 400, {"message": "labels must be a comma-separated string"}, None
    if iid is None:
        iid = str(t.next_id())
    elif f"gitlab:{project}!{iid}" not in t.issues:
        return 404, {"message": "404 Not found"}, None
    t.issues[f"gitlab:{project}!{iid}"] = body
    return (
        (201 if h.command == "POST" else 200),
        {"iid": int(iid), "web_url": f"{base}/gl/{project}/{iid}"},
        None,
    )


def _jira(h: Any, t: Tracker, base: str, body: Any, raw: bytes, key: str | None = None) -> Answer:
    expected = "Basic " + base64.b64encode(f"{JIRA_EMAIL}:{TOKEN}".encode()).decode()
    if h.headers.get("Authorization") != expected:
        return 401, {"errorMessages": ["unauthorized"]}, None
    fields = (body or {}).get("fields", {})
    description = fields.get("description", {})
    if description.get("type") != "doc" or description.get("version") != 1:
        return (
            400,
            {"errors": {"description": "Operation value must be an Atlassian Document"}},
            None,
        )
    if key is None:
        if "project" not in fields or "summary" not in fields or "issuetype" not in fields:
            return 400, {"errors": {"project": "required"}}, None
        key = f"{fields['project']['key']}-{t.next_id()}"
        t.issues[f"jira:{key}"] = fields
        return 201, {"id": "10001", "key": key, "self": f"{base}/rest/api/3/issue/10001"}, None
    if f"jira:{key}" not in t.issues:
        return 404, {"errorMessages": ["Issue does not exist"]}, None
    t.issues[f"jira:{key}"] = fields
    return 204, None, None


def _linear(h: Any, t: Tracker, base: str, body: Any, raw: bytes) -> Answer:
    if h.headers.get("Authorization") != TOKEN:
        return 401, {"errors": [{"message": "Authentication required"}]}, None
    query, variables = body.get("query", ""), body.get("variables", {})
    if "issueCreate" in query:
        data = variables["input"]
        if not data.get("id") or not data.get("teamId") or not data.get("title"):
            return 400, {"errors": [{"message": "id, teamId and title are required"}]}, None
        key = f"linear:{data['id']}"
        if key in t.issues:  # a client-chosen id can be created once only
            return 200, {"errors": [{"message": "Entity already exists"}]}, None
        t.issues[key] = data
        issue = {
            "id": data["id"],
            "identifier": f"SRCH-{t.next_id()}",
            "url": f"{base}/li/{data['id']}",
        }
        return 200, {"data": {"issueCreate": {"success": True, "issue": issue}}}, None
    if "issueUpdate" in query:
        key = f"linear:{variables['id']}"
        if key not in t.issues:
            return 200, {"errors": [{"message": "Entity not found"}]}, None
        t.issues[key] |= variables["input"]
        issue = {"id": variables["id"], "identifier": "SRCH", "url": f"{base}/li/{variables['id']}"}
        return 200, {"data": {"issueUpdate": {"success": True, "issue": issue}}}, None
    return 400, {"errors": [{"message": "unknown operation"}]}, None


def _webhook(h: Any, t: Tracker, base: str, body: Any, raw: bytes) -> Answer:
    expected = "sha256=" + hmac.new(SECRET.encode(), raw, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(h.headers.get("X-Misstriage-Signature", ""), expected):
        return 401, {"message": "bad signature"}, None
    t.issues[f"webhook:{h.headers.get('Idempotency-Key')}"] = body
    return 200, {"ok": True}, None


ROUTES = [
    (r"/repos/([^/]+/[^/]+)/issues", "POST", _github),
    (r"/repos/([^/]+/[^/]+)/issues/(\d+)", "PATCH", _github),
    (r"/api/v4/projects/([^/]+)/issues", "POST", _gitlab),
    (r"/api/v4/projects/([^/]+)/issues/(\d+)", "PUT", _gitlab),
    (r"/rest/api/3/issue", "POST", _jira),
    (r"/rest/api/3/issue/([A-Z0-9]+-\d+)", "PUT", _jira),
    (r"/graphql", "POST", _linear),
    (r"/hook", "POST", _webhook),
]


def serve() -> Iterator[tuple[str, Tracker]]:
    tracker = Tracker()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(tracker, ""))
    base = f"http://127.0.0.1:{server.server_address[1]}"
    server.RequestHandlerClass = _handler(tracker, base)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield base, tracker
    finally:
        server.shutdown()
        server.server_close()
