"""`tabjob operator`'s settings: the environment is read in one place (Settings), and every flag overrides it."""

from __future__ import annotations

import argparse

import pytest

from tabjob.cli.operator import add_parser, settings_from


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    return parser.parse_args(["operator", *argv])


def test_flags_override_the_environment_which_overrides_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TABJOB_LOST_POD_TIMEOUT", "120")
    monkeypatch.setenv("TABJOB_LEADER_ELECTION", "true")
    monkeypatch.setenv("POD_NAMESPACE", "ops")
    monkeypatch.setenv("POD_NAME", "tabjob-operator-0")
    s = settings_from(_args())
    assert (s.lost_pod_timeout, s.leader_election, s.lease_namespace) == (120.0, True, "ops")
    assert s.identity == "tabjob-operator-0" and s.unschedulable_grace == 60.0
    # These three flags were parsed and then dropped before Settings kept every flag's value.
    s = settings_from(
        _args(
            "--lost-pod-timeout", "30", "--image-pull-timeout", "40", "--unschedulable-grace", "50", "--no-leader-elect"
        )
    )
    assert (s.lost_pod_timeout, s.image_pull_timeout, s.unschedulable_grace, s.leader_election) == (30, 40, 50, False)
    s = settings_from(_args("--lease-name", "mine", "--lease-duration", "20", "--qps", "5", "--image", "t:1"))
    assert (s.lease_name, s.lease_duration, s.api_qps, s.default_image) == ("mine", 20.0, 5.0, "t:1")


def test_the_policy_directory_comes_from_the_chart_or_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings_from(_args()).policy_dir == ""
    monkeypatch.setenv("TABJOB_POLICY_DIR", "/etc/tabjob/policy")
    assert settings_from(_args()).policy_dir == "/etc/tabjob/policy"
    assert settings_from(_args("--policy-dir", "/tmp/p")).policy_dir == "/tmp/p"
