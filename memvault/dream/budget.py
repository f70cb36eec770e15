"""How many tokens one dream request may carry, and fitting a prompt's parts into that.

Prompts are counted with cl100k_base (memvault.base.tokens) times MARGIN, so a model whose tokenizer
is up to 15% less efficient still gets a prompt that fits, plus PER_MESSAGE tokens per message for
the chat template. Out of the window the budget reserves the answer (sent as max_tokens) and a
repair turn: the previous answer and the list of its problems, asked in the same conversation.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memvault.base import tokens
from memvault.base.config import LLMConfig
from memvault.dream.llm import DEFAULT_CONTEXT_WINDOW, DEFAULT_MAX_OUTPUT, Limits
from memvault.errors import LLMError

MARGIN = 1.15
PER_MESSAGE = 8             # chat template tokens around each message (ChatML uses 5)
REPAIR_ROOM = 512           # the problems listed in a repair turn
ANSWER_TOKENS_PER_FACT = 80  # a disposition and a cited statement in compact JSON, with room to spare
FACT_SHARE = 0.5            # of the room left after the instructions; related pages get the rest
MIN_FACT_ROOM = 256         # below this the window cannot hold a useful batch
SHRINK = 0.7                # after a context-length refusal
MIN_SCALE = 0.1             # about six refusals in a row: give up on this batch for this attempt


@dataclass
class Budget:
    limits: Limits
    scale: float = 1.0      # lowered for the rest of the run each time the provider says "too long"
    fact_cap: int | None = None  # lowered each time an answer is cut at max_tokens

    @property
    def window(self) -> int:
        return self.limits.window

    @property
    def max_output(self) -> int:
        return self.limits.max_output

    @property
    def prompt_limit(self) -> int:
        """Most tokens a first request carries: its answer, and a repair turn after it, still fit."""
        return int((self.window - 2 * self.max_output - REPAIR_ROOM) * self.scale)

    @property
    def conversation_limit(self) -> int:
        """Most tokens any request carries, a repair turn included: the answer always has room."""
        return self.window - self.max_output

    def max_facts(self) -> int:
        """Facts one answer has room for (three quarters of it; the rest for MEMORY.md lines)."""
        room = max(1, int(self.max_output * 0.75 * self.scale) // ANSWER_TOKENS_PER_FACT)
        return min(room, self.fact_cap) if self.fact_cap else room

    def cap_facts(self, n: int) -> None:
        """An answer about more than `n` facts was cut at max_tokens: no bigger batch this run."""
        self.fact_cap = max(1, min(n, self.fact_cap or n))

    def fact_room(self, base: int) -> int:
        """Tokens for a batch's facts, given the instructions' `base` tokens."""
        return max(0, int((self.prompt_limit - base) * FACT_SHARE))

    def shrink(self) -> bool:
        """Ask for less from now on; False once shrinking has gone as far as it sensibly can."""
        self.scale *= SHRINK
        return self.scale >= MIN_SCALE

    def check(self, base: int) -> None:
        """Refuse a window too small for the instructions plus a useful batch."""
        if self.prompt_limit - base < MIN_FACT_ROOM:
            needed = base + MIN_FACT_ROOM + REPAIR_ROOM + 2 * self.max_output
            raise LLMError(
                f"a context window of {self.window} tokens ({self.limits.source}) is too small for dream: "
                f"the instructions take {base} and the answer {self.max_output}; set [llm] context_window "
                f"to at least {needed} (and [llm] max_output_tokens lower), or choose a larger model"
            )


def planning_limits(llm: LLMConfig) -> Limits:
    """The limits memvault.toml states, without asking litellm (status and plans without a model)."""
    window = llm.context_window or DEFAULT_CONTEXT_WINDOW
    out = llm.max_output_tokens or DEFAULT_MAX_OUTPUT
    return Limits(window, max(1, min(out, window // 4)), "memvault.toml" if llm.context_window else "default")


def prompt_tokens(messages: Sequence[dict]) -> int:
    """A request's tokens as a less efficient tokenizer might count them, chat template included."""
    text = sum(tokens.count(m.get("content") or "") for m in messages)
    return math.ceil(text * MARGIN) + PER_MESSAGE * (len(messages) + 1)


def text_tokens(text: str) -> int:
    return math.ceil(tokens.count(text) * MARGIN)


def compact(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@dataclass
class Part:
    """Optional prompt data, added after the required data while it fits.

    `items` is a list (the most useful first; an item too big is passed over for the next, or with
    `whole` the list goes in entire or not at all) or a text (cut at a line end). `cap` bounds the
    part's own tokens.
    """

    key: str
    items: list | str
    whole: bool = False
    cap: int | None = None


def fit(render: Callable[[dict], list[dict]], data: dict, parts: Sequence[Part], limit: int) -> list[dict] | None:
    """The messages for `data` plus as much of each part as fits `limit`; None when `data` alone does not."""
    messages = render(data)
    used = prompt_tokens(messages)
    if used > limit:
        return None
    for part in parts:
        room = limit - used if part.cap is None else min(limit - used, part.cap)
        if isinstance(part.items, str):
            text = tokens.truncate(part.items, int(room / MARGIN) - 4)
            if text and text != part.items:
                text += "\n…"
            taken: list | str = text
        else:
            taken, spent = [], 0
            for item in part.items:
                cost = text_tokens(compact(item)) + 1
                if spent + cost > room:
                    if part.whole:
                        taken = []
                        break
                    continue  # a smaller item further down may still fit
                taken.append(item)
                spent += cost
        if not taken:
            continue
        data[part.key] = taken
        used = prompt_tokens(render(data))
        # the parts were counted apart; the whole is what counts
        while used > limit and data.get(part.key):
            if isinstance(data[part.key], str) or part.whole:
                del data[part.key]
            else:
                data[part.key] = data[part.key][:-1]
                if not data[part.key]:
                    del data[part.key]
            used = prompt_tokens(render(data))
    return render(data)
