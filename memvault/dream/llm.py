"""The one place dream talks to a language model, through litellm (imported lazily).

A call ends in an answer or in one of four errors, because the runner treats each differently:
- ContextTooLong: the request (or its answer) does not fit the model's window: ask with less;
- ProviderRefused: deterministic, about this request (bad request, content policy): a failed
  attempt, never retried within a run;
- ProviderNotSetUp: deterministic, about the setup (no key, a refused key, an unknown model): the
  same for every batch, so it never counts towards skipping one; not retried within a run;
- ProviderUnavailable: transient (429, 5xx, timeout, connection) after the retries made here: an
  outage, which never counts towards skipping a batch either.
Each message is one line that says what to do.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from memvault.dream.response_formats import ResponseFormats, format_for, format_refused, response_format_for
from memvault.errors import LLMError

# litellm error classes a later attempt may cure; every other class is deterministic.
TRANSIENT = (
    "RateLimitError",
    "Timeout",
    "APIConnectionError",
    "InternalServerError",
    "ServiceUnavailableError",
    "BadGatewayError",
)
# The OpenAI SDK reports a missing key as a client-side error that litellm maps to a 500.
_MISSING_KEY = ("missing credentials", "api_key client option must be set", "no api key")
# litellm reports a refused connection as APIConnectionError or, through the OpenAI SDK, a 500
_NO_CONNECTION = ("connection error", "connection refused", "name or service not known")
# litellm nests class names: "litellm.X: litellm.Y: Z: OpenAIException - <the provider's words>",
# "litellm.Timeout: APITimeoutError - Request timed out. Error_str: Request timed out."
_PREFIX = re.compile(r"^(?:(?:litellm\.)?\w*(?:Error|Timeout):\s*)*(?:\w*(?:Exception|Error|error)\s+-\s*)*")
# ...and appends its own diagnostics: the error again, or the SDK's response object and class names
_SUFFIX = re.compile(r"(?:\s*Error_str:|,\s*Received response\s*-|\s*<class ).*$")
# What a transient failure is, in words, by litellm's class
_TRANSIENT_WORDS = {
    "RateLimitError": "rate limited",
    "APIConnectionError": "connection failed",
    "InternalServerError": "server error",
    "ServiceUnavailableError": "service unavailable",
    "BadGatewayError": "bad gateway",
}
# For a model litellm does not know (local servers): a window most local setups give, and room
# for an answer of about 20 facts. memvault.toml's [llm] context_window / max_output_tokens say better.
DEFAULT_CONTEXT_WINDOW = 8192
DEFAULT_MAX_OUTPUT = 2048
OLLAMA = ("ollama", "ollama_chat")


class ContextTooLong(LLMError):
    """The provider refused the request as longer than the model's context window."""


class AnswerTruncated(ContextTooLong):
    """The answer stopped at max_tokens: the batch asks for more than one answer can hold."""


class ProviderRefused(LLMError):
    """A deterministic refusal (credentials, model, request, content policy): asking again won't help."""


class ProviderNotSetUp(ProviderRefused):
    """The key or the model is wrong (no key, a refused key, an unknown model): a setup to fix,
    not a batch to give up on."""


class ProviderUnavailable(LLMError):
    """No answer after every retry: timeouts, rate limits, server errors, no connection."""


@dataclass
class LLMSettings:
    model: str
    api_base: str | None = None
    api_key: str | None = None
    timeout: float = 120.0
    attempts: int = 3          # calls per request, retries included
    backoff: float = 2.0       # seconds before the first retry; doubles each time
    temperature: float = 0.0
    context_window: int | None = None     # [llm] context_window; None: litellm's model info
    max_output_tokens: int | None = None  # [llm] max_output_tokens; None: litellm's model info


@dataclass(frozen=True)
class Limits:
    """How many tokens the model takes in all (window) and how long an answer may be."""

    window: int
    max_output: int
    source: str       # where the window comes from: memvault.toml, litellm, or default


def load_litellm():
    """Import litellm quietly and offline (no cost-map download, no banner)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def provider_of(model: str) -> str:
    """The litellm provider of a model string; ProviderRefused when litellm knows none."""
    provider = provider_name(model)
    if provider is None:
        raise ProviderRefused(unknown_model(model))
    return provider


def unknown_model(model: str) -> str:
    return (f"unknown model string {model!r}: litellm knows no provider for it; write provider/model, "
            "e.g. openai/gpt-4o-mini, anthropic/claude-haiku-4-5 or ollama_chat/qwen2.5")


def model_limits(settings: LLMSettings) -> Limits:
    """[llm] context_window / max_output_tokens first, then litellm's model info, then defaults.

    The answer is reserved out of the window, so max_output is held to a quarter of it: room for
    the prompt, the answer, and the answer again in a repair turn.
    """
    info: dict = {}
    if not (settings.context_window and settings.max_output_tokens):
        litellm = load_litellm()
        try:
            info = litellm.get_model_info(settings.model) or {}
        except Exception:  # noqa: BLE001 - a model litellm has not mapped (local servers)
            info = {}
    known = info.get("max_input_tokens")
    if settings.context_window:
        window, source = settings.context_window, "memvault.toml"
    elif isinstance(known, int) and known > 0 and provider_name(settings.model) not in OLLAMA:
        # ollama's own window (num_ctx) is not the model's: memvault sets num_ctx to its own figure
        window, source = known, "litellm"
    else:
        window, source = DEFAULT_CONTEXT_WINDOW, "default"
    out = settings.max_output_tokens or info.get("max_output_tokens") or DEFAULT_MAX_OUTPUT
    return Limits(window=window, max_output=max(1, min(int(out), window // 4)), source=source)


def provider_name(model: str) -> str | None:
    litellm = load_litellm()  # (outside the try: an import cut short by a signal is no unknown model)
    try:
        return litellm.get_llm_provider(model)[1]
    except Exception:  # noqa: BLE001 - litellm raises BadRequestError for an unknown provider
        return None




def local_server(settings: LLMSettings) -> bool:
    """ollama, or an OpenAI-compatible server at an api_base of the user's: they enforce a schema."""
    provider = provider_name(settings.model)
    return provider in OLLAMA or (provider == "openai" and bool(settings.api_base))


def complete_json(settings: LLMSettings, messages: list[dict], schema: dict, *,
                  limits: Limits | None = None, formats: ResponseFormats | None = None) -> str:
    """Send the messages and return the raw answer text, or raise one of the errors above.

    With `formats`, a local server gets the schema itself (see LADDER); else the strongest JSON
    mode litellm says the provider supports.
    """
    litellm = load_litellm()
    kwargs = _request(settings, messages, limits)
    ladder = formats if formats is not None and local_server(settings) else None
    fmt = format_for(ladder.current(settings), schema) if ladder is not None else response_format_for(
        litellm, settings.model, schema)
    if fmt:
        kwargs["response_format"] = fmt
    last = "no attempt made"
    attempt = 0
    while attempt < max(1, settings.attempts):
        attempt += 1
        try:
            response = _within(settings.timeout, litellm.completion, kwargs)
        except Timeout as exc:
            # The call given up on may still hold the server (a one-slot local model): asking again
            # now would queue behind it, or run beside it and be billed twice. Next run.
            raise ProviderUnavailable(f"{settings.model}: {exc}; dream tries again next run") from None
        except Exception as exc:  # noqa: BLE001 - litellm maps provider errors onto its own classes
            if ladder is not None and format_refused(exc) and ladder.step_down(settings):
                kwargs["response_format"] = format_for(ladder.current(settings), schema)
                attempt -= 1  # not the server's fault: ask again at once with the next format
                continue
            kind, last = classify(exc, settings)
            if kind == "context":
                raise ContextTooLong(last) from None
            if kind == "setup":
                raise ProviderNotSetUp(last) from None
            if kind == "refused":
                raise ProviderRefused(last) from None
            if attempt < settings.attempts:
                time.sleep(settings.backoff * (2 ** (attempt - 1)))
            continue
        content, finish = _content(response)
        if finish == "length":
            raise AnswerTruncated(f"{settings.model}: the answer stopped at max_tokens={kwargs.get('max_tokens')}")
        # An empty answer is an answer (a model at temperature 0 gives it again): the runner rejects
        # it like any answer without the object, a failed attempt, rather than an outage for ever.
        return content or ""
    raise ProviderUnavailable(
        f"{settings.model}: no answer after {settings.attempts} attempt(s): {last}; dream tries again next run"
    )


def ping(settings: LLMSettings) -> float:
    """One tiny request, no retry (doctor --llm): the seconds it took, or the classified error."""
    litellm = load_litellm()
    kwargs = _request(settings, [{"role": "user", "content": 'Answer with the JSON object {"ok": true}.'}], None)
    kwargs["max_tokens"] = 16
    start = time.monotonic()
    try:
        response = _within(settings.timeout, litellm.completion, kwargs)
    except Exception as exc:  # noqa: BLE001
        kind, message = classify(exc, settings)
        error = {"transient": ProviderUnavailable, "setup": ProviderNotSetUp}.get(kind, ProviderRefused)
        raise error(message) from None
    text, finish = _content(response)
    # No text at all is a server dream cannot use; a reasoning model may spend the 16 tokens of
    # this ping on its reasoning and stop at the limit, which is a live model.
    if text is None and finish != "length":
        raise ProviderRefused(f"{settings.model}: answered with no text; dream's batches would fail the same way")
    return time.monotonic() - start


class Timeout(Exception):
    """The whole call outlasted [llm] timeout: an outage, not retried within the run."""


def _within(seconds: float, call, kwargs: dict):
    """`call(**kwargs)`, or Timeout once `seconds` have passed.

    litellm's timeout bounds each read from the connection, not the call: a server that sends its
    answer a byte at a time (a stuck proxy, an overloaded local model) kept dream waiting, and
    holding the dream lock, for ever. The call runs on a daemon thread; one given up on is left to
    end with the process.
    """
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["answer"] = call(**kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            outcome["error"] = exc

    worker = threading.Thread(target=run, name="memvault-llm", daemon=True)
    worker.start()
    worker.join(seconds + 1.0)  # (a second of grace: litellm's own timeout reports better when it fires)
    if worker.is_alive():
        raise Timeout(f"no complete answer within {seconds:g} s ([llm] timeout)")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["answer"]


def _request(settings: LLMSettings, messages: list[dict], limits: Limits | None) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "model": settings.model,
        "messages": messages,
        "timeout": settings.timeout,
        "temperature": settings.temperature,
        # retries are ours (bounded, logged); keep the SDK from multiplying them
        "num_retries": 0,
        "max_retries": 0,
    }
    if limits is not None:
        kwargs["max_tokens"] = limits.max_output
        if provider_name(settings.model) in OLLAMA:
            # ollama silently cuts a prompt longer than its num_ctx (2048 or 4096 by default)
            kwargs["num_ctx"] = limits.window
    if settings.api_base:
        kwargs["api_base"] = settings.api_base
    if settings.api_key:
        kwargs["api_key"] = settings.api_key
    return kwargs


def classify(exc: Exception, settings: LLMSettings) -> tuple[str, str]:
    """("context" | "setup" | "refused" | "transient", one line saying what happened and what to do)."""
    name = type(exc).__name__
    text = provider_message(exc)
    lowered = str(exc).lower()
    status = getattr(exc, "status_code", None)
    model = settings.model
    if name == "ContextWindowExceededError":
        return "context", f"{model}: the request does not fit the model's context window ({text})"
    setup = _setup_problem(name, lowered, status, text, settings)
    if setup is not None:
        return "setup", setup
    if name == "ContentPolicyViolationError" or _provider_code(exc) == "content_policy_violation":
        return "refused", f"{model}: the provider refused the batch under its content policy ({text})"
    if name == "APIConnectionError" or any(k in lowered for k in _NO_CONNECTION):
        where = settings.api_base or "the provider"
        return "transient", f"cannot reach {where} ({text}); is the server running?"
    transient = _transient_problem(name, status, text)
    if transient is not None:
        return "transient", transient
    return "refused", f"{model}: the provider rejected the request ({name}: {text})"


def _setup_problem(name: str, lowered: str, status: object, text: str, settings: LLMSettings) -> str | None:
    """What is wrong with the setup (the key, the model's name), or None when the error is not of it."""
    model = settings.model
    if name == "AuthenticationError" or any(k in lowered for k in _MISSING_KEY):
        keys = _missing_keys(settings)
        if keys:
            return (f"{model}: no API key: set {' or '.join(keys)} "
                    "(any value for a local server without authentication)")
        return f"{model}: the provider refused the API key ({text}); check it"
    if "llm provider not provided" in lowered:
        return unknown_model(model)
    if name == "NotFoundError" or status == 404:
        return (f"{model}: the provider does not know this model ({text}); check --model, "
                "MEMVAULT_MODEL or [llm] model")
    return None


def _transient_problem(name: str, status: object, text: str) -> str | None:
    """A timeout, rate limit or server error (worth asking again later), or None."""
    if name in TRANSIENT or (isinstance(status, int) and (status >= 500 or status in (408, 429))):
        if name == "Timeout" or status == 408:
            return f"timed out: {text}"
        words = "rate limited" if status == 429 else _TRANSIENT_WORDS.get(name, "server error")
        return f"{words}{f' ({status})' if isinstance(status, int) else ''}: {text}"
    return None


def _provider_code(exc: Exception) -> str | None:
    """The `code` of the provider's error body, when litellm kept the body: its own class for an
    error depends on the words of the message it was handed, the body's code does not."""
    body = getattr(exc, "body", None)
    inner = body.get("error", body) if isinstance(body, dict) else None
    code = inner.get("code") if isinstance(inner, dict) else None
    return code if isinstance(code, str) else None


def provider_message(exc: Exception) -> str:
    """The provider's own words, without litellm's nested class prefixes, on one line."""
    lines = str(exc).strip().splitlines()
    text = _SUFFIX.sub("", _PREFIX.sub("", lines[0] if lines else "")).strip() or type(exc).__name__
    return text[:200]


def _missing_keys(settings: LLMSettings) -> list[str]:
    if settings.api_key:
        return []
    try:
        found = load_litellm().validate_environment(model=settings.model, api_base=settings.api_base)
    except Exception:  # noqa: BLE001
        return []
    return [k for k in found.get("missing_keys") or [] if k.endswith("_KEY")]


def _content(response) -> tuple[str | None, str | None]:
    try:
        choice = response.choices[0]
        text = choice.message.content
    except (AttributeError, IndexError, KeyError):
        return None, None
    finish = getattr(choice, "finish_reason", None)
    return (text if isinstance(text, str) and text.strip() else None), finish
