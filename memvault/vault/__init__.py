"""The Vault facade (memvault.vault.facade) and the half that opens one (memvault.vault.opening)."""

# (found here too: the names front ends and tests have always taken from memvault.vault)
from memvault.storage.vault_dir import default_vault_path, explained_if_broken, locate
from memvault.vault.facade import Vault
from memvault.vault.moment import VaultAt

__all__ = ["Vault", "VaultAt", "default_vault_path", "explained_if_broken", "locate"]
