"""Hugging Face Hub access, checked before any training starts.

A run with `--push_to_hub` that only learns at the end, hours later, that it cannot push has
wasted its time; `check_hub_ready` fails in seconds instead, naming what is missing (the Hub id,
the network, the token). Model ids that are not local folders are checked by
`training.checkpoints.check_model_source`, with a message that says to pass a local folder instead.
Offline mode is huggingface_hub's own (`is_offline_mode`), and the endpoint is probed through its
HTTP session with a timeout, as `whoami` alone would wait without one.
"""

from __future__ import annotations

from huggingface_hub import constants, get_session, get_token, is_offline_mode
from huggingface_hub.utils import build_hf_headers, hf_raise_for_status

from ..training.checkpoints import HubNotReadyError

REACHABILITY_TIMEOUT_S = 5.0


def hub_reachable(timeout: float) -> bool:
    """The Hub endpoint answers an HTTP HEAD within `timeout` seconds (any status: it is there)."""
    try:
        get_session().head(constants.ENDPOINT, timeout=timeout)
    except Exception:  # the session's transport errors (refused, DNS, timeout) all mean unreachable
        return False
    return True


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
    if is_offline_mode():
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
    if not hub_reachable(timeout):
        raise HubNotReadyError(
            f"--push_to_hub: the Hub at {constants.ENDPOINT} did not answer within {timeout:.0f} s (no network?). "
            "Drop --push_to_hub to train offline, and push the saved folders later with `hf upload`."
        )
    try:  # HfApi.whoami has no timeout: an endpoint that accepts and never answers would hang the run
        response = get_session().get(f"{constants.ENDPOINT}/api/whoami-v2", headers=build_hf_headers(token=token),
                                     timeout=timeout)
        hf_raise_for_status(response)
        return response.json()["name"]
    except Exception as error:  # any refusal (401, 403, network) means the push would fail too
        if "timeout" in type(error).__name__.lower():
            raise HubNotReadyError(
                f"--push_to_hub: the Hub at {constants.ENDPOINT} did not answer within {timeout:.0f} s. Drop "
                "--push_to_hub to train offline, and push the saved folders later with `hf upload`."
            ) from None
        raise HubNotReadyError(f"--push_to_hub: the Hub refused the token ({error}). Run `hf auth login` again.") from error


__all__ = ["check_hub_ready"]
