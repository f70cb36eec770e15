"""The vault's file formats: text in, values out, and back; no file access.

layout (every file name and what a name says), facts (daily log items), pages (wiki pages),
tombstones (tombstones.jsonl lines), dreamlog (log.md entries and the watermark). Storage reads
and writes the files with them; the features read what they mean through them.
"""
