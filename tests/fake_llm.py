"""A scripted OpenAI-compatible chat server on 127.0.0.1 for driving litellm's real call path.

Each request consumes the next step of `script` (then `default`). A step is the answer text, a
dict {"content", "delay", "status"}, or a callable(request_body) returning either of those.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeLLM:
    def __init__(self, script=(), default=None):
        self.script = list(script)
        self.default = default
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> FakeLLM:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                step = fake._next(body)
                if callable(step):
                    step = step(body)
                if isinstance(step, str):
                    step = {"content": step}
                step = step or {"status": 500}
                if step.get("delay"):
                    time.sleep(step["delay"])
                status = step.get("status", 200)
                if status != 200:
                    payload = {"error": {"message": f"fake error {status}", "type": "fake", "code": status}}
                else:
                    payload = {
                        "id": f"chatcmpl-{len(fake.requests)}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "fake"),
                        "choices": [{
                            "index": 0,
                            "message": {"role": "assistant", "content": step.get("content", "")},
                            "finish_reason": "stop",
                        }],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
                    }
                raw = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def _next(self, body):
        with self._lock:
            self.requests.append(body)
            return self.script.pop(0) if self.script else self.default


def request_data(body: dict) -> dict:
    """The vault data (facts, pages, ...) quoted in a dream request."""
    text = body["messages"][-1]["content"]
    start = text.index("<data>\n") + len("<data>\n")
    return json.loads(text[start:text.index("\n</data>")])


def consolidate_everything(path: str = "wiki/topics/journal.md", title: str = "Journal"):
    """A well-behaved model: one page citing every fact of the batch, all 'consolidated'."""

    def answer(body: dict) -> str:
        data = request_data(body)
        facts = data["facts"]
        existing = next((p for p in data["pages"] if p["path"] == path), None)
        lines = [f"- {f['time'][:10]}: {f['text'].splitlines()[0]} [^{f['id']}]" for f in facts]
        if existing:
            op = {"action": "update", "path": path, "section": "Entries",
                  "body": _merge_section(existing["body"], lines)}
        else:
            op = {"action": "create", "path": path, "title": title, "tags": ["journal"],
                  "body": "## Entries\n\n" + "\n".join(lines)}
        return json.dumps({
            "pages": [op] if facts else [],
            "facts": [{"id": f["id"], "disposition": "consolidated", "page": path} for f in facts],
            "memory": [{"text": f"{len(facts)} new journal entries", "page": path}] if facts else None,
        })

    return answer


def _merge_section(body: str, lines: list[str]) -> str:
    old = [line for line in body.splitlines() if line.startswith("- ")]
    return "\n".join(old + lines)
