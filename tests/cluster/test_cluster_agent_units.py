"""Pure parts of the node agent, without a cluster: $(VAR) expansion, fieldRef paths, hosts files."""

from __future__ import annotations

from pathlib import Path

from tests.cluster.agent.hosts import HostsFiles, PodName
from tests.cluster.agent.pods import exit_code
from tests.cluster.agent.podspec import expand, field_value


def test_expand_follows_kubernetes_rules() -> None:
    env = {"A": "1", "B": "two"}
    assert expand("$(A)-$(B)", env) == "1-two"
    assert expand("$(MISSING) stays", env) == "$(MISSING) stays"
    assert expand("$$(A) is escaped", env) == "$(A) is escaped"


def test_field_value_paths() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"team": "x"}},
        "spec": {"nodeName": "gpu-node-1", "serviceAccountName": "sa"},
        "status": {"podIP": "127.10.0.7", "podIPs": [{"ip": "127.10.0.7"}]},
    }
    assert field_value(pod, "metadata.labels['team']") == "x"
    assert field_value(pod, "status.podIP") == "127.10.0.7"
    assert field_value(pod, "spec.nodeName") == "gpu-node-1"


def test_exit_code_of_a_signal_is_128_plus_n() -> None:
    assert exit_code(-9) == 137 and exit_code(3) == 3


def test_hosts_files_list_peers_under_headless_services_only(tmp_path: Path) -> None:
    hosts = HostsFiles()
    hosts.set_headless({("ns", "ring")})
    a, b = PodName("ns", "a", "a", "ring", "127.10.0.2"), PodName("ns", "b", "b", "other", "127.10.0.3")
    hosts.add("ua", a, tmp_path / "a")
    hosts.add("ub", b, tmp_path / "b")
    text_b = (tmp_path / "b").read_text()
    assert "127.10.0.2\ta.ring.ns.svc.cluster.local a.ring.ns.svc a.ring.ns a.ring\n" in text_b
    assert "b.other.ns.svc" not in (tmp_path / "a").read_text()  # no headless Service named "other"
    inode = (tmp_path / "b").stat().st_ino
    hosts.remove("ua")
    assert "a.ring" not in (tmp_path / "b").read_text()
    assert (tmp_path / "b").stat().st_ino == inode  # rewritten in place, so a bind mount sees the change
