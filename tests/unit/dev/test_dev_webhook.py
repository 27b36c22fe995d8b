"""`dev up` starts the webhook as a user would run it: at info log level."""

from __future__ import annotations

from pathlib import Path

import pytest

from kinitiras_py.base.errors import DevError
from kinitiras_py.dev import controlplane, processes


def test_dev_up_runs_the_webhook_at_info_level(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[list[str]] = []

    def spawn(argv: list[str], log: Path, env: dict[str, str] | None = None) -> int:
        started.append(argv)
        return 2 ** 22 + 1  # above pid_max's default: never a live process, so the start-up wait fails at once

    monkeypatch.setattr(processes, "spawn", spawn)
    (tmp_path / "logs").mkdir()
    state = controlplane.State(run_dir=str(tmp_path), kubeconfig=str(tmp_path / "kubeconfig"),
                               server="https://127.0.0.1:1")
    with pytest.raises(DevError, match="webhook exited"):
        controlplane.start_webhook(state, log=lambda _m: None)
    [argv] = started
    assert [a for a in argv if a.startswith("--log-level")] == ["--log-level=info"]
