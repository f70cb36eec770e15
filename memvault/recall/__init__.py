"""Recall across time: the vault as it stood at a commit (as_of), which fact replaces which
(succession), and where a memory came from (why)."""
