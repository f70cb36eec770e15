"""How a vault stands (`status`) and what is wrong with it (`doctor`: checks, and safe repairs).

doctor runs the probes it is given (health.doctor): the vault-wide ones are health.checks, and each
feature package brings its own (index.probes, dream.probes, remote.probes); the Vault facade
lists them in order. So health needs none of the features, and a feature's checks live beside it.
"""
