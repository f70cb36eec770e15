"""Recall beyond search: facts by time (timeline: recent, threads, sessions) and the prompt-ready
bundle (context: MEMORY.md, relevant hits, recent facts within a token budget).
"""
