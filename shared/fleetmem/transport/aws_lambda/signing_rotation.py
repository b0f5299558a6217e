"""Secrets Manager rotation of the stage's signing key (`functions/signing_rotation`): one of the four
rotation steps per invoke (createSecret, setSecret, testSecret, finishSecret), for the secret the
event names (`fleetmem.adapters.aws.signing_keys.rotation_step`, reached through `fleetmem.wiring`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def rotate(event: Mapping[str, Any]) -> None:
    """Run the rotation step `event` asks for."""
    from fleetmem.wiring import rotation_step, sdk_client

    rotation_step(sdk_client("signing_rotation"), event)
