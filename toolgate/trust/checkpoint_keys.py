"""The keys of the audit log's checkpoints: which signs them in this process, and which check them.

A checkpoint is signed with the deployment's key that seals now and names it (`key_id`,
migration 0022), so the chain still verifies across a rotation of the deployment secret:
`toolgate audit verify` checks each checkpoint with the key it names, taken from the public
keys the operator trusts (current, next, previous and retired: public halves are kept for
this). A checkpoint written before 0022 names no key and is checked with each trusted key.

A process hands its key source over once (`use_keyset`, or a fixed key with `use_key`); one
that never did takes the deployment's keyset from its settings on its first append. Either way
the key is asked for at every append, so a stage signs with the new key once it has read the
new keyset, without a restart. A writer with no key at all appends without a checkpoint.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from toolgate.secrets import SecretMissing, SecretProvider
from toolgate.settings import Settings, load_settings
from toolgate.trust.deployment_keys import KeySource, deployment_keys, key_id_of, public_keys_of
from toolgate.trust.ed25519 import PrivateKey, PublicKey
from toolgate.trust.keyset import KeysetError

log = logging.getLogger("toolgate.audit")

_UNSET: Any = object()
_source: Any = _UNSET  # a KeySource, a fixed (key id, PrivateKey), or None: no checkpoints


def use_key(key: PrivateKey | None) -> None:
    """Sign this process's checkpoints with `key`, whatever the keyset says later."""
    global _source
    _source = None if key is None else (key_id_of(key.public.raw), key)


def use_keyset(keys: KeySource) -> None:
    """Sign this process's checkpoints with the key that seals now in `keys`, at each append."""
    global _source
    _source = keys


def signer() -> tuple[str, PrivateKey] | None:
    """The id and key that sign a checkpoint appended now; None: append without one."""
    global _source
    if _source is _UNSET:
        try:
            _source = deployment_keys(load_settings())
        except (SecretMissing, KeysetError, ValueError) as exc:
            log.warning("audit rows are appended without checkpoints: %s", exc, extra={"action": "no_checkpoints"})
            _source = None
    if _source is None or isinstance(_source, tuple):
        return _source
    sealing = _source.view().sealing
    return sealing.key_id, sealing.signing_key


class TrustedKeys:
    """The public keys an auditor trusts, by id: a checkpoint is checked with the one it names,
    or with each of them when it names none (written before key ids)."""

    def __init__(self, keys: Iterable[PublicKey]) -> None:
        self.keys = {key_id_of(key.raw): key for key in keys}

    def ok(self, key_id: str | None, signature: bytes, message: bytes) -> bool:
        if key_id is None:
            return any(key.ok(signature, message) for key in self.keys.values())
        key = self.keys.get(key_id)
        return key is not None and key.ok(signature, message)


def trusted_keys(settings: Settings) -> TrustedKeys:
    """The public keys this operator trusts the checkpoints of: the configured public key, those
    `toolgate up` published (runtime.json), and, where the secret is held, every key of its keyset
    (current, next, previous and retired)."""
    found = public_keys_of(settings.deployment_public_key)
    if settings.runtime_file.exists():
        runtime = json.loads(settings.runtime_file.read_text())
        found += [bytes.fromhex(public) for public in runtime.get("deployment_public_keys", [])]
    if SecretProvider(settings.secrets_path).has(settings.deployment_secret_ref):
        found += deployment_keys(settings).public_keys(retired=True)
    return TrustedKeys(PublicKey(raw) for raw in dict.fromkeys(found))
