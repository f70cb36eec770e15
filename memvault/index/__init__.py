"""The search index: a disposable projection of the vault files (Tantivy + fastembed vectors).

Nothing here is imported by `import memvault` or `import memvault.cli`; heavy libraries load
inside the functions that need them.
"""
