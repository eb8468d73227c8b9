"""`toolgate secret rotate` on a keyset file, without a deployment: the file it writes (whole, 0600
in a 0700 directory, never a secret said), and the steps it refuses."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolgate.ops.secret_rotation import RotationRefused, keyset_path, rotate
from toolgate.secrets import env_name
from toolgate.settings import Settings
from toolgate.trust.keyset import KeyState, Step, parse

SECRET = "a-deployment-secret-of-some-length"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    secrets = tmp_path / "secrets"
    secrets.mkdir(mode=0o755)
    (secrets / "deployment-secret").write_text(SECRET + "\n")
    return Settings(home=tmp_path, keyset_refresh_seconds=1.0, keyset_grace_seconds=60.0)


def test_staging_writes_the_keyset_whole_and_for_its_owner_only(settings: Settings) -> None:
    done = rotate(settings)
    path = settings.secrets_path / "deployment-secret"
    keyset = parse(path.read_text())
    assert done.step is Step.STAGE and keyset.current.secret == SECRET and keyset.next is not None
    assert done.key.key_id.startswith("dk_") and keyset.next.secret not in repr(done.key)
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
    assert sorted(p.name for p in path.parent.iterdir()) == [".deployment-secret.lock", "deployment-secret"]
    assert (path.parent / ".deployment-secret.lock").stat().st_mode & 0o777 == 0o600


def test_each_step_in_turn_and_none_out_of_it(settings: Settings) -> None:
    rotate(settings)
    promoted = rotate(settings, force=True)  # past the check of what stages hold (no deployment here)
    assert promoted.step is Step.PROMOTE and promoted.other is not None
    assert promoted.other.state is KeyState.PREVIOUS and promoted.other.until_ms is not None
    with pytest.raises(RotationRefused, match="accepted until"):
        _retire_unforced(settings)
    retired = rotate(settings, force=True)  # early, on purpose
    keyset = parse((settings.secrets_path / "deployment-secret").read_text())
    assert retired.step is Step.RETIRE and SECRET not in (settings.secrets_path / "deployment-secret").read_text()
    assert [e.public_key for e in keyset.retired] == [promoted.other.public_key]


def _retire_unforced(settings: Settings) -> None:
    """Retire with the keyset's own check of the grace, and no deployment to ask."""
    from toolgate.ops import secret_rotation

    path = keyset_path(settings)
    keyset = secret_rotation.read(settings)
    secret_rotation._step(keyset, int(keyset.previous.until_ms or 0) - 1, 0, False, path)  # type: ignore[union-attr]


def test_a_grace_shorter_than_two_keyset_reads_is_refused(settings: Settings) -> None:
    with pytest.raises(RotationRefused, match="shorter than two"):
        rotate(settings, grace_s=1.5)


def test_a_secret_from_the_environment_is_not_rotated_here(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(env_name("deployment-secret"), SECRET)
    with pytest.raises(RotationRefused, match="comes from TOOLGATE_SECRET_DEPLOYMENT_SECRET") as refused:
        rotate(settings)
    assert SECRET not in str(refused.value)
    assert os.environ[env_name("deployment-secret")] == SECRET
