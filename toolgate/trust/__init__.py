"""Who asked and what a stage decided, proven (docs/security.md, docs/architecture.md "The trust
boundary"): Ed25519 signatures and MACs, and the keys behind them.

* `signing.py`: approvers' decisions and their canonical documents; `ed25519.py`: the verifier;
* `agent_keys.py`: agents' keys, the local keyring and its signer; `proposal_signing.py`: a
  proposal's signing document, alone or under a Merkle root (`merkle.py`);
* `integrity.py`: the stages' MACs and the deployment's signature on edge records;
* `keyset.py`, `deployment_keys.py`: the deployment secret's keys by id, and their rotation.
"""
