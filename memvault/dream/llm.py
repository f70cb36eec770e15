"""The one place dream talks to a language model, through litellm (imported lazily)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from memvault.errors import LLMError

# Error class names in litellm that a later attempt may cure. Auth is in the list because
# providers and proxies return 401/403 transiently during key rotation; the bound keeps it cheap.
RETRYABLE = (
    "RateLimitError",
    "Timeout",
    "APIConnectionError",
    "InternalServerError",
    "ServiceUnavailableError",
    "BadGatewayError",
    "AuthenticationError",
)


@dataclass
class LLMSettings:
    model: str
    api_base: str | None = None
    api_key: str | None = None
    timeout: float = 120.0
    attempts: int = 3          # calls per request, retries included
    backoff: float = 2.0       # seconds before the first retry; doubles each time
    temperature: float = 0.0


def load_litellm():
    """Import litellm quietly and offline (no cost-map download, no banner)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def response_format_for(litellm, model: str, schema: dict) -> dict | None:
    """Strongest JSON mode the provider supports; the answer is validated either way."""
    try:
        if litellm.supports_response_schema(model=model):
            return {
                "type": "json_schema",
                "json_schema": {"name": "dream_batch", "schema": schema, "strict": False},
            }
        if "response_format" in (litellm.get_supported_openai_params(model=model) or []):
            return {"type": "json_object"}
    except Exception:  # noqa: BLE001 - unknown model strings: plain text, the validator still guards
        return None
    return None


def complete_json(settings: LLMSettings, messages: list[dict], schema: dict) -> str:
    """Send the messages and return the raw answer text; raise LLMError once retries are spent."""
    litellm = load_litellm()
    kwargs: dict[str, Any] = {
        "model": settings.model,
        "messages": messages,
        "timeout": settings.timeout,
        "temperature": settings.temperature,
        # retries are ours (bounded, logged); keep the SDK from multiplying them
        "num_retries": 0,
        "max_retries": 0,
    }
    if settings.api_base:
        kwargs["api_base"] = settings.api_base
    if settings.api_key:
        kwargs["api_key"] = settings.api_key
    fmt = response_format_for(litellm, settings.model, schema)
    if fmt:
        kwargs["response_format"] = fmt

    last = "no attempt made"
    for attempt in range(1, max(1, settings.attempts) + 1):
        try:
            response = litellm.completion(**kwargs)
        except Exception as exc:  # noqa: BLE001 - litellm maps provider errors onto its own classes
            name = type(exc).__name__
            last = f"{name}: {_first_line(exc)}"
            if name not in RETRYABLE and not _is_5xx(exc):
                raise LLMError(f"LLM call failed ({settings.model}): {last}") from None
            if attempt < settings.attempts:
                time.sleep(settings.backoff * (2 ** (attempt - 1)))
            continue
        content = _content(response)
        if content is None:
            last = "empty answer"
            continue
        return content
    raise LLMError(
        f"LLM call failed after {settings.attempts} attempt(s) ({settings.model}): {last}"
    )


def _content(response) -> str | None:
    try:
        text = response.choices[0].message.content
    except (AttributeError, IndexError, KeyError):
        return None
    return text if isinstance(text, str) and text.strip() else None


def _is_5xx(exc: Exception) -> bool:
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and 500 <= status < 600


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]
