"""A scripted OpenAI-compatible chat server on 127.0.0.1 for driving litellm's real call path.

Each request consumes the next step of `script` (then `default`). A step is the answer text, a
dict {"content", "delay", "status", "body"}, or a callable(request_body) returning either of
those; "body" is sent verbatim (a recorded response, tests/data/llm-transcripts; bytes as they are).

It behaves like the real servers do where memvault depends on it:
- it counts the prompt with its own tokenizer: cl100k_base times `ratio` (a model tokenizer less
  efficient than cl100k_base) plus ChatML's framing per message;
- a prompt plus max_tokens over `window` gets HTTP 400 with the error text of OpenAI and
  llama-cpp-python's server (`flavor="openai"`), or a prompt alone over it the text of llama.cpp's
  own server (`flavor="llama.cpp"`), which litellm maps onto ContextWindowExceededError;
- an answer longer than max_tokens is cut there, with finish_reason "length";
- error statuses come with the provider's usual error body;
- with `trickle` set, an answer comes a byte at a time after its headers, as from a stuck proxy.
"""

from __future__ import annotations

import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

# What OpenAI-compatible servers answer for these statuses (the message is what litellm reads).
ERRORS = {
    400: ("Invalid value for 'temperature'.", "invalid_request_error", None),
    401: ("Incorrect API key provided: sk-test. You can find your API key at "
          "https://platform.openai.com/account/api-keys.", "invalid_request_error", "invalid_api_key"),
    404: ("The model `fake-dream` does not exist or you do not have access to it.", "invalid_request_error",
          "model_not_found"),
    429: ("Rate limit reached for requests. Please try again in 20ms.", "requests", "rate_limit_exceeded"),
    500: ("The server had an error while processing your request. Sorry about that!", "server_error", None),
    503: ("The engine is currently overloaded, please try again later.", "server_error", None),
}


def _encoding():
    from memvault.dream.llm import load_litellm

    load_litellm()  # offline: without it, importing litellm fetches its cost map from the network
    from litellm.litellm_core_utils.default_encoding import encoding  # cl100k_base, shipped offline

    return encoding


class FakeLLM:
    def __init__(self, script=(), default=None, *, window: int | None = None, ratio: float = 1.0,
                 flavor: str = "openai"):
        self.script = list(script)
        self.default = default
        self.window = window
        self.ratio = ratio
        self.flavor = flavor
        self.trickle = 0.0  # seconds between the bytes of an answer (a stuck proxy, an overloaded model)
        self.requests: list[dict] = []
        self.refused: list[int] = []   # prompt tokens of each request refused as too long
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def tokens(self, text: str) -> int:
        return math.ceil(len(_encoding().encode(text, disallowed_special=())) * self.ratio)

    def prompt_tokens(self, body: dict) -> int:
        # ChatML: <|im_start|>role\n ... <|im_end|>\n per message, then <|im_start|>assistant\n
        return sum(self.tokens(m.get("content") or "") + 5 for m in body.get("messages", [])) + 3

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> FakeLLM:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                status, payload, delay = fake._respond(body)
                if delay:
                    time.sleep(delay)
                raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(raw)))
                    self.end_headers()
                    if fake.trickle:  # a byte at a time, each well within any read timeout
                        for byte in raw:
                            self.wfile.write(bytes([byte]))
                            self.wfile.flush()
                            time.sleep(fake.trickle)
                    else:
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

    def _respond(self, body: dict) -> tuple[int, dict, float]:
        with self._lock:
            self.requests.append(body)
        prompt = self.prompt_tokens(body)
        wanted = body.get("max_tokens")
        too_long = self._too_long(prompt, wanted)
        if too_long is not None:
            self.refused.append(prompt)
            return 400, too_long, 0
        with self._lock:
            step = self.script.pop(0) if self.script else self.default
        if callable(step):
            step = step(body)
        if isinstance(step, str):
            step = {"content": step}
        step = step or {"status": 500}
        status = step.get("status", 200)
        if "body" in step:
            return status, step["body"], step.get("delay", 0)
        if status != 200:
            message, kind, code = ERRORS.get(status, (f"error {status}", "server_error", None))
            return status, {"error": {"message": message, "type": kind, "param": None, "code": code}}, 0
        content, finish = step.get("content", ""), "stop"
        if wanted and self.tokens(content) > wanted:
            encoding = _encoding()
            content = encoding.decode(encoding.encode(content, disallowed_special=())[: int(wanted / self.ratio)])
            finish = "length"
        answer = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": self.tokens(content),
                      "total_tokens": prompt + self.tokens(content)},
        }
        return status, answer, step.get("delay", 0)

    def _too_long(self, prompt: int, wanted: int | None) -> dict | None:
        if self.window is None:
            return None
        if self.flavor == "llama.cpp":
            if prompt <= self.window:
                return None
            return {"error": {"code": 400, "message": "the request exceeds the available context size, try "
                              "increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": prompt,
                              "n_ctx": self.window}}
        if prompt + (wanted or 0) <= self.window:
            return None
        return {"error": {
            "message": f"This model's maximum context length is {self.window} tokens. However, you requested "
                       f"{prompt + (wanted or 0)} tokens ({prompt} in the messages, {wanted} in the completion). "
                       "Please reduce the length of the messages or completion.",
            "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}


def request_data(body: dict) -> dict:
    """The vault data (facts, pages, ...) quoted in a dream request."""
    text = body["messages"][1]["content"]
    start = text.index("<data>\n") + len("<data>\n")
    return json.loads(text[start:text.index("\n</data>")])


def consolidate_everything(path: str = "wiki/topics/journal.md", title: str = "Journal"):
    """A well-behaved model: one page citing every fact of the batch, all 'consolidated'."""

    def answer(body: dict) -> str:
        data = request_data(body)
        facts = data["facts"]
        existing = next((p for p in data.get("pages", []) if p["path"] == path), None)
        lines = [f"- {f['time'][:10]}: {f['text'].splitlines()[0]} [^{f['id']}]" for f in facts]
        if existing:
            op = {"action": "update", "path": path, "section": "Entries",
                  "body": _merge_section(existing["body"], lines)}
        elif facts and _exists(data, path):
            # the page exists but did not fit the prompt: add to it without seeing it
            op = {"action": "update", "path": path, "section": f"Entries {facts[0]['time'][:10]}",
                  "body": "\n".join(lines)}
        else:
            op = {"action": "create", "path": path, "title": title, "tags": ["journal"],
                  "body": "## Entries\n\n" + "\n".join(lines)}
        memory = [{"text": f"{len(facts)} new journal entries", "page": path}] if "memory_md" in data else None
        return json.dumps({
            "pages": [op] if facts else [],
            "facts": [{"id": f["id"], "disposition": "consolidated", "page": path} for f in facts],
            "memory": memory if facts else None,
        })

    return answer


def consolidate_by_tag(zone: str = "topics"):
    """A well-behaved model over many batches: one page per first tag, each batch adding its own
    section (so an answer stays short however long the page grows), every fact cited.

    Like a real model it follows a repair turn that says a page already exists."""

    def answer(body: dict) -> str:
        data = request_data(body)
        told = body["messages"][-1]["content"] if len(body["messages"]) > 2 else ""
        groups: dict[str, list] = {}
        for fact in data["facts"]:
            groups.setdefault((fact.get("tags") or ["misc"])[0], []).append(fact)
        pages = []
        for tag, facts in groups.items():
            path = f"wiki/{zone}/{tag.lower()}.md"
            lines = "\n".join(f"- {f['text'].splitlines()[0][:200]} [^{f['id']}]" for f in facts)
            exists = any(p["path"] == path for p in data.get("pages", [])) or _exists(data, path) \
                or f"{path!r}: it already exists" in told
            section = f"Notes {facts[0]['time']} {abs(hash(facts[0]['text'])) % 10**6}"
            pages.append({"action": "update", "path": path, "section": section, "body": lines} if exists else
                         {"action": "create", "path": path, "title": tag, "body": f"## {section}\n\n{lines}"})
        paths = {f["id"]: f"wiki/{zone}/{tag.lower()}.md" for tag, facts in groups.items() for f in facts}
        return json.dumps({"pages": pages,
                           "facts": [{"id": i, "disposition": "consolidated", "page": p} for i, p in paths.items()]})

    return answer


def _exists(data: dict, path: str) -> bool:
    return f"]({path})" in data.get("index_md", "") or path in json.dumps(data.get("memory_md", []))


def _merge_section(body: str, lines: list[str]) -> str:
    old = [line for line in body.splitlines() if line.startswith("- ")]
    return "\n".join(old + lines)


@pytest.fixture(name="fake")
def fake_llm():
    """`fake`: a FakeLLM for one test; support.dream.settings points a dream at it."""
    with FakeLLM() as server:
        yield server


@pytest.fixture(name="fake")
def fake_llm_in_env(monkeypatch):
    """`fake`: a FakeLLM that MEMVAULT_MODEL and MEMVAULT_API_BASE name, as a user's shell would."""
    with FakeLLM() as server:
        monkeypatch.setenv("MEMVAULT_MODEL", "openai/fake-dream")
        monkeypatch.setenv("MEMVAULT_API_BASE", server.api_base)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        yield server
