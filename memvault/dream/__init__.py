"""Dream: nightly LLM consolidation of the daily logs into wiki pages, index.md and MEMORY.md.

Modules: planner (watermark, pending days, batches), prompt, llm (lazy litellm), schema and
validate (the answer and its proof of work), pages, memory_md, journal (log.md), consolidate
(the runner), undo, status. Import them directly: this package imports nothing heavy.
"""
