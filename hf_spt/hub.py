"""Hugging Face Hub access, checked before any training starts.

A run with `--push_to_hub` that only learns at the end, hours later, that it cannot push has
wasted its time; `check_hub_ready` fails in seconds instead, naming what is missing (the Hub id,
the network, the token). Model ids that are not local folders go through the same check's
offline test, with a message that says to pass a local folder instead.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlparse

from huggingface_hub import HfApi, constants, get_token, try_to_load_from_cache

REACHABILITY_TIMEOUT_S = 5.0


class HubNotReadyError(RuntimeError):
    """The Hub cannot be used for what the run asked (offline, no token, unreachable, no repo id)."""


def hub_offline() -> bool:
    """True when HF_HUB_OFFLINE is set, read now (the environment may change after import)."""
    return constants.HF_HUB_OFFLINE or constants._is_true(os.environ.get("HF_HUB_OFFLINE"))


def _reachable(endpoint: str, timeout: float) -> bool:
    """A TCP connection to the Hub endpoint opens within `timeout` seconds (no retries, no HTTP)."""
    url = urlparse(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False


def check_hub_ready(hub_model_id: str | None, timeout: float = REACHABILITY_TIMEOUT_S) -> str:
    """Check that models can be pushed to `hub_model_id`; return the Hub user name.

    Raises `HubNotReadyError` (before anything is trained) when the id is missing, HF_HUB_OFFLINE
    is set, no token is stored, the endpoint does not answer within `timeout` seconds, or the
    token is refused.
    """
    if not hub_model_id:
        raise HubNotReadyError(
            "--push_to_hub needs --hub_model_id (e.g. `--hub_model_id my-user/markov-spt`); each phase "
            "is pushed to HUB_MODEL_ID-<phase> (pretrain, spt, scratch)."
        )
    if hub_offline():
        raise HubNotReadyError(
            "--push_to_hub was given but HF_HUB_OFFLINE is set: unset HF_HUB_OFFLINE, or drop --push_to_hub "
            "and push the saved folders later with `hf upload`."
        )
    token = get_token()
    if token is None:
        raise HubNotReadyError(
            "--push_to_hub needs a Hugging Face token with write access: run `hf auth login` or set HF_TOKEN, "
            "then start again (nothing was trained)."
        )
    if not _reachable(constants.ENDPOINT, timeout):
        raise HubNotReadyError(
            f"--push_to_hub: the Hub at {constants.ENDPOINT} did not answer within {timeout:.0f} s (no network?). "
            "Drop --push_to_hub to train offline, and push the saved folders later with `hf upload`."
        )
    try:
        return HfApi().whoami(token=token)["name"]
    except Exception as error:  # any refusal (401, 403, network) means the push would fail too
        raise HubNotReadyError(f"--push_to_hub: the Hub refused the token ({error}). Run `hf auth login` again.") from error


def _cached(repo_id: str) -> bool:
    """True when the Hub model `repo_id` is already in the local cache (usable offline)."""
    try:
        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except ValueError:  # not a valid repo id at all
        return False


def check_model_source(name_or_path: str) -> None:
    """A model source is a local folder, a cached Hub model, or a Hub id that needs the Hub: fail early offline."""
    if Path(name_or_path).exists() or _cached(name_or_path):
        return
    if hub_offline():
        raise HubNotReadyError(
            f"{name_or_path!r} is not a local folder, and HF_HUB_OFFLINE is set so it cannot be fetched from the "
            "Hub: pass a folder written by save_pretrained, or unset HF_HUB_OFFLINE."
        )
    if not _reachable(constants.ENDPOINT, REACHABILITY_TIMEOUT_S):
        raise HubNotReadyError(
            f"{name_or_path!r} is not a local folder, and the Hub at {constants.ENDPOINT} is unreachable: "
            "pass a folder written by save_pretrained, or connect to the network."
        )


__all__ = ["HubNotReadyError", "check_hub_ready", "check_model_source", "hub_offline"]
