"""`memvault import`: memories kept by other tools, read as facts to add.

Each format's reader (a module here) turns its source into records: the fields of a fact (text,
its time, category, tags, source, session) plus a key made from the source's own ids, or from the
record's place and text where it has none. The vault adds them as one commit and skips every
record whose key is already stored, so importing the same thing twice adds nothing the second
time. A record that cannot be read stops the import before anything is written, naming its place
(`memory/2026-01-05.md:12`, `conversations.json: conversation 3 ...`); a record with nothing to
keep (an assistant's message, an empty item) is skipped, and the reason counted.
"""
