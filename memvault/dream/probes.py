"""doctor's checks of dream: a batch that keeps failing, and the model's configuration (with
`doctor --llm`, one tiny request)."""

from __future__ import annotations

from memvault.dream.status import dream_status
from memvault.errors import LLMError
from memvault.health.doctor import FAIL, OK, WARN, Check, Probe, shown_details
from memvault.storage.store import Storage


def check_dream(storage: Storage) -> Check:
    """A batch whose latest attempts failed: named with since when and why, so nothing stalls silently."""
    state = dream_status(storage)
    failing = state.get("failing")
    if failing is None:
        last = state.get("last_dream")
        return Check("dream", OK, f"last dream {last['outcome']} {last['batch']} at {last['at']}" if last
                     else "never run")
    runs = f"{failing['failures']} time(s)" + (f", {failing['errors']} of them without an answer"
                                               if failing["errors"] else "")
    message = f"batch {failing['batch']} keeps failing: {runs} since {failing['since']}: {failing['reason']}"
    details = [f"problem: {p}" for p in failing["problems"]]
    if failing["outcome"] == "error":
        details.append("outages and a key or model the provider refuses never count towards skipping a batch: "
                       "it waits until the model answers (check with `memvault doctor --llm`)")
    else:
        details.append(f"after {state['max_retries']} failed attempts in a row the batch is skipped; its "
                       "facts stay searchable as raw facts")
    return Check("dream", WARN, message, shown_details(details))


def check_llm(storage: Storage, contact: bool = False) -> Check:
    """The model string, its keys and its window; with `contact`, one tiny request."""
    model = storage.config.llm_model
    if not model:
        return Check("LLM", WARN, "no model set: `memvault dream` cannot run (set MEMVAULT_MODEL or "
                     "[llm] model in memvault.toml)")
    from memvault.dream.consolidate import llm_settings
    from memvault.dream.llm import load_litellm, model_limits, ping, provider_of

    settings = llm_settings(storage)
    where = f" at {settings.api_base}" if settings.api_base else ""
    try:
        provider_of(model)
    except LLMError as e:
        return Check("LLM", FAIL, str(e))
    limits = model_limits(settings)
    window = f"a window of {limits.window} tokens ({limits.source}), answers of up to {limits.max_output}"
    try:
        found = load_litellm().validate_environment(model=model, api_base=settings.api_base)
    except Exception:  # noqa: BLE001 - litellm's check is advisory; the call itself says more
        found = {}
    missing = [k for k in found.get("missing_keys") or [] if k.endswith("_KEY")]
    if missing:
        # A warning: a clone that never dreams (dream runs on one machine) needs no key.
        return Check("LLM", WARN, f"{model}{where}: `memvault dream` cannot run here until {' or '.join(missing)} "
                     "is set in its environment (any value for a local server without authentication)")
    if not contact:
        return Check("LLM", OK, f"{model}{where}: configuration complete, {window} (not contacted; "
                     "`memvault doctor --llm` sends one tiny request)")
    try:
        seconds = ping(settings)
    except LLMError as e:
        return Check("LLM", FAIL, str(e))
    return Check("LLM", OK, f"{model}{where}: answered in {seconds:.1f} s; {window}")


def _contacting_llm(storage: Storage) -> Check:
    return check_llm(storage, contact=True)


DREAM = Probe(check_dream)
LLM = Probe(check_llm, contacting=_contacting_llm)
