"""Recall beyond search: facts by time (timeline: recent, threads, sessions), the prompt-ready
bundle (context: MEMORY.md, relevant hits, recent facts within a token budget), and recall across
time: the vault as it stood at a commit (asof), which fact replaces which (succession), and where a
memory came from (why).
"""
