"""--push_to_hub fails before any training when the Hub cannot be used, with a message naming the fix."""

from __future__ import annotations

import socket
import time

import pytest
from tiny_backbone_runs import tiny_arguments

import hf_spt.runs.hub as hub
from hf_spt.runs.hub import check_hub_ready
from hf_spt.experiments.pipeline import run_experiment
from hf_spt.training.checkpoints import HubNotReadyError


def test_offline_push_fails_fast_before_training(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    data_args, model_args, exp, training = tiny_arguments(tmp_path / "run", push_to_hub=True, hub_model_id="me/markov")
    start = time.perf_counter()
    with pytest.raises(HubNotReadyError, match="HF_HUB_OFFLINE is set"):
        run_experiment(data_args, model_args, exp, training)
    assert time.perf_counter() - start < 30  # generous bound: the check makes no network call offline
    assert not (tmp_path / "run").exists()  # nothing was trained or written


def test_push_needs_a_repo_id_and_a_token(monkeypatch):
    with pytest.raises(HubNotReadyError, match="needs --hub_model_id"):
        check_hub_ready(None)
    monkeypatch.setattr(hub, "is_offline_mode", lambda: False)
    monkeypatch.setattr(hub, "get_token", lambda: None)
    with pytest.raises(HubNotReadyError, match="hf auth login"):
        check_hub_ready("me/markov")


def test_hub_that_accepts_and_never_answers_fails_within_the_timeout(monkeypatch):
    monkeypatch.setattr(hub, "is_offline_mode", lambda: False)
    monkeypatch.setattr(hub, "get_token", lambda: "hf_fake")
    monkeypatch.setattr(hub.constants, "HF_HUB_OFFLINE", False)  # the request must really go out
    with socket.socket() as server:  # listens (the kernel accepts connections) but never reads nor answers
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        monkeypatch.setattr(hub.constants, "ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        start = time.perf_counter()
        with pytest.raises(HubNotReadyError, match="did not answer within 1 s"):
            check_hub_ready("me/markov", timeout=1.0)  # before: waited forever for the whoami answer
        elapsed = time.perf_counter() - start
    assert elapsed < 5, f"took {elapsed:.1f} s with a 1 s timeout"


def test_unreachable_hub_fails_within_the_timeout(monkeypatch):
    monkeypatch.setattr(hub, "is_offline_mode", lambda: False)
    monkeypatch.setattr(hub, "get_token", lambda: "hf_fake")
    monkeypatch.setattr(hub.constants, "ENDPOINT", "http://127.0.0.1:9")  # discard port: nothing listens
    with pytest.raises(HubNotReadyError, match="did not answer"):
        check_hub_ready("me/markov", timeout=1.0)
