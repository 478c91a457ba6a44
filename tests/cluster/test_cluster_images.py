"""Images on the nodes: each blob is stored once on disk for all nodes, yet each node's content store is its own,
so one node's garbage collector never takes a blob from another (it deletes every blob its own metadata does not
list, which emptied a content store the nodes shared)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from hack.cluster import controlplane, images, nodes
from tests.cluster.fixtures import Cluster

pytestmark = pytest.mark.e2e

PROBE = "localhost/tabjob/gc-probe:1"


def _probe_archive(tmp_path: Path, version: str) -> images.Archive:
    """An image whose config blob no other image has (its entry point is its own)."""
    toolbox = controlplane.binaries(build=False)["NODE_BIN"] / "toolbox"
    entrypoint = ["/toolbox", "gc-probe", version]
    return images.write_toolbox_archive(toolbox, PROBE, entrypoint, tmp_path / f"probe-{version}.tar")


@pytest.fixture
def probe(cluster: Cluster, tmp_path: Path) -> Iterator[images.Archive]:
    """The probe image on every node."""
    archive = _probe_archive(tmp_path, "v1")
    controlplane.import_into_nodes([archive])
    yield archive
    for spec in nodes.NODES:
        _remove(spec.name, archive)


def _remove(node: str, archive: images.Archive) -> None:
    """Remove the probe as the kubelet does through the CRI: every name it has (containerd's CRI adds one, its
    config digest), and synchronously, so the node's garbage collector has run when this returns."""
    names = [PROBE, archive.config_digest()]
    nodes.ctr(node, "images", "rm", "--sync", *names, check=False)


def _names(node: str) -> list[str]:
    return nodes.ctr(node, "images", "list", "--quiet").stdout.split()


def _status(node: str) -> str:
    """The probe's line of `ctr images check`: `complete (2/2)` or `incomplete (1/2)` among its columns."""
    lines = [line for line in nodes.ctr(node, "images", "check").stdout.splitlines() if line.startswith(PROBE)]
    assert lines, f"{PROBE} is not on {node}"
    found = re.search(r"\b(complete|incomplete) \(\d+/\d+\)", lines[0])
    assert found, lines[0]
    return found.group(1)


def test_a_blob_is_one_file_on_disk_for_every_node(probe: images.Archive) -> None:
    digest = probe.config_digest().removeprefix("sha256:")
    inodes = {(nodes.blob_dir(spec.name) / digest).stat().st_ino for spec in nodes.NODES}
    assert inodes == {(nodes.BLOB_POOL / digest).stat().st_ino}


def test_removing_an_image_from_one_node_leaves_the_others_whole(probe: images.Archive) -> None:
    first, *others = [spec.name for spec in nodes.NODES]
    digest = probe.config_digest().removeprefix("sha256:")
    _remove(first, probe)
    assert not (nodes.blob_dir(first) / digest).exists()
    for node in others:
        assert _status(node) == "complete"
        assert (nodes.blob_dir(node) / digest).exists()


def test_a_new_version_frees_the_one_it_replaces(cluster: Cluster, tmp_path: Path) -> None:
    old, new = _probe_archive(tmp_path, "v1"), _probe_archive(tmp_path, "v2")
    gone = old.config_digest().removeprefix("sha256:")
    try:
        controlplane.import_into_nodes([old])
        # containerd's CRI names each image by its id too (at once, on the import's event): the name that kept
        # every replaced version on the nodes.
        cluster.wait_for(
            "the CRI's id name for v1 on every node",
            lambda: all(f"sha256:{gone}" in _names(spec.name) for spec in nodes.NODES),
            timeout=30,
        )
        controlplane.import_into_nodes([new])
        for spec in nodes.NODES:
            assert _status(spec.name) == "complete"
            assert f"sha256:{gone}" not in _names(spec.name)
            assert not (nodes.blob_dir(spec.name) / gone).exists(), spec.name
        assert not (nodes.BLOB_POOL / gone).exists()  # pruned once no node links it
    finally:
        for spec in nodes.NODES:
            _remove(spec.name, new)


def test_a_blob_collected_between_ingest_and_import_is_ingested_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The node's collector may take a freshly ingested blob before the image names it (anything deleted on the
    node runs it): here it is made to, once, right before the import. The import ingests again and succeeds."""
    archive = _probe_archive(tmp_path, "collected")
    node = nodes.NODES[0].name
    real_ctr = nodes.ctr
    taken: list[str] = []

    def ctr(name: str, *args: str, **kwargs: object) -> object:
        if args[:2] == ("images", "import") and not taken:
            taken.append(archive.config_digest())
            real_ctr(name, "content", "rm", archive.config_digest())  # what the collector does to an unnamed blob
        return real_ctr(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(nodes, "ctr", ctr)
    try:
        assert images.import_all(node, [archive]) == [PROBE]
        assert taken == [archive.config_digest()]
        assert "ingesting again" in capsys.readouterr().out
        assert _status(node) == "complete"
    finally:
        monkeypatch.undo()
        _remove(node, archive)
