"""Dream: nightly LLM consolidation of the daily logs into wiki pages, index.md and MEMORY.md.

Modules: consolidate (the entry point: plan, then one job after another), planner (watermark,
pending days, batches sized by tokens), runner (what every job shares: the token budget, the
model call, repair turns, failures, staleness, the commit), batch and scrub (the two kinds of
job), budget (tokens a request may carry), prompt, llm (lazy litellm, errors by kind), schema
and validate (the answer and its proof of work), memory_md, results, undo, status. The page format is
memvault.formats.pages, log.md's is memvault.formats.dreamlog. Import modules directly: this package imports
nothing heavy.
"""
