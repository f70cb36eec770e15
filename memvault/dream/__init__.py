"""Dream: nightly LLM consolidation of the daily logs into wiki pages, index.md and MEMORY.md.

Modules: consolidate (the entry point: plan, then one job after another), planner (watermark,
pending days, batches), runner (what every job shares: the model call, failures, staleness, the
commit), batch and scrub (the two kinds of job), prompt, llm (lazy litellm), schema and validate
(the answer and its proof of work), memory_md, results, undo, status. The page format is
memvault.pages, log.md's is memvault.dreamlog. Import modules directly: this package imports
nothing heavy.
"""
