"""Images on the test cluster's nodes: no registry is reachable, so every image a pod runs is imported into each
node's containerd (namespace k8s.io) by `make cluster`.

- The harness's own two, written here as OCI archives from the toolbox binary (tools/node/toolbox): the pod
  sandbox `localhost/tabjob/pause:1` (containerd's sandbox_image) and `localhost/tabjob/toolbox:1`, which the
  cluster's own tests run (probes for DNS, Services, GPUs; no shell).
- The project's images, from `hack/images/build.sh --print` (lines `<ref> <oci-archive>`) when that script
  exists: python-base, the operator and the CPU trainer.

An archive whose manifest digest a node already has under that name is skipped, so a warm `make cluster`
imports nothing (the nodes' image stores persist in the cache, nodes.containerd_root).

Each blob is written once into the pool of blobs (nodes.BLOB_POOL), hard-linked into the node's content store and
recorded there by digest (`ctr content ingest --expected-digest`, which does not read a blob the store holds), then
an archive of the index alone is imported, which names and unpacks the image. `ctr images import` of the whole
archive would stream all of it through containerd's API on every node: 23 s a node for the 2.9 GB trainer, even
when only its top layer was new.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from hack.cluster import network, nodes
from hack.cluster.paths import CACHE, REPO

TOOLBOX_IMAGE = "localhost/tabjob/toolbox:1"
KUEUE_REPOSITORY = "localhost/kueue/kueue"  # tagged with the version tools/kueue/go.mod pins
PROJECT_IMAGES_SCRIPT = REPO / "hack" / "images" / "build.sh"


@dataclass(frozen=True)
class Archive:
    ref: str
    path: Path

    def manifest_digest(self) -> str:
        """The digest containerd records for the image: that of the archive's (only) manifest or index."""
        with tarfile.open(self.path) as tar:
            member = tar.extractfile("index.json")
            if member is None:
                raise ValueError(f"{self.path}: no index.json (not an OCI archive)")
            index = json.load(member)
        return str(index["manifests"][0]["digest"])

    def config_digest(self) -> str:
        """The digest of the image's config: containerd's CRI names the image by it too (its image id)."""
        with tarfile.open(self.path) as tar:
            member = tar.extractfile(f"blobs/sha256/{self.manifest_digest().removeprefix('sha256:')}")
            if member is None:
                raise ValueError(f"{self.path}: no manifest blob for {self.manifest_digest()}")
            return str(json.load(member)["config"]["digest"])


def _blob(tar: tarfile.TarFile, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest}")
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
    return f"sha256:{digest}"


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _layer(binary: Path, name: str = "toolbox", links: tuple[str, ...] = ("pause",)) -> bytes:
    """One layer: the binary at /<name> (the toolbox: /toolbox, and /pause a hard link to it), and an empty /tmp."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tmp = tarfile.TarInfo("tmp")
        tmp.type, tmp.mode = tarfile.DIRTYPE, 0o1777
        tar.addfile(tmp)
        info = tar.gettarinfo(str(binary), name)
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0
        info.mode = 0o755
        with open(binary, "rb") as f:
            tar.addfile(info, f)
        for extra in links:
            link = tarfile.TarInfo(extra)
            link.type, link.linkname, link.mode = tarfile.LNKTYPE, name, 0o755
            tar.addfile(link)
    return buf.getvalue()


def write_toolbox_archive(
    binary: Path,
    ref: str,
    entrypoint: list[str],
    out: Path,
    name: str = "toolbox",
    links: tuple[str, ...] = ("pause",),
    user: str = "65534:65534",
) -> Archive:
    """An OCI image archive (what `ctr images import` reads) with one layer holding one static binary."""
    layer = _layer(binary, name, links)
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = {
        "architecture": "amd64",
        "os": "linux",
        # 65534 (nobody): the images meet Pod Security `restricted` (runAsNonRoot) without a securityContext.
        "config": {"Entrypoint": entrypoint, "User": user, "WorkingDir": "/tmp"},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": "hack/cluster/images.py"}],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with tarfile.open(tmp, "w") as tar:
        config_digest = _blob(tar, json.dumps(config, sort_keys=True).encode())
        layer_digest = _blob(tar, layer)
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": config_digest,
                "size": len(json.dumps(config, sort_keys=True).encode()),
            },
            "layers": [
                {"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest, "size": len(layer)}
            ],
        }
        manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
        manifest_digest = _blob(tar, manifest_bytes)
        index = {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": manifest_digest,
                    "size": len(manifest_bytes),
                    "annotations": {"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": ref},
                    "platform": {"architecture": "amd64", "os": "linux"},
                }
            ],
        }
        _add(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        _add(tar, "index.json", json.dumps(index).encode())
    tmp.replace(out)
    return Archive(ref, out)


def harness_archives(node_bin: Path) -> list[Archive]:
    """The pause and toolbox archives, written once per toolbox build (keyed by the binary's digest)."""
    binary = node_bin / "toolbox"
    key = hashlib.sha256(binary.read_bytes()).hexdigest()[:16]
    out = CACHE / "images" / key
    wanted = [
        (nodes.PAUSE_IMAGE, ["/pause"], out / "pause.tar"),
        (TOOLBOX_IMAGE, ["/toolbox"], out / "toolbox.tar"),
    ]
    return [
        Archive(ref, path) if path.exists() else write_toolbox_archive(binary, ref, entry, path)
        for ref, entry, path in wanted
    ]


def kueue_archive(kueue_bin: Path, version: str) -> Archive:
    """Kueue's controller image as its chart runs it (`/manager`, user 65532 as in Kueue's own distroless image),
    written once per build of the binary."""
    binary = kueue_bin / "kueue"
    key = hashlib.sha256(binary.read_bytes()).hexdigest()[:16]
    path = CACHE / "images" / key / "kueue.tar"
    ref = f"{KUEUE_REPOSITORY}:{version}"
    if path.exists():
        return Archive(ref, path)
    return write_toolbox_archive(binary, ref, ["/manager"], path, name="manager", links=(), user="65532:65532")


def project_archives() -> list[Archive]:
    """The project's images that hack/images/build.sh has built (none when the script is absent)."""
    if not PROJECT_IMAGES_SCRIPT.exists():
        return []
    proc = subprocess.run([str(PROJECT_IMAGES_SCRIPT), "--print"], capture_output=True, text=True)
    archives = []
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and Path(parts[1]).is_file():
            archives.append(Archive(parts[0], Path(parts[1])))
    return archives


def present(node: str) -> dict[str, str]:
    """ref -> manifest digest of the images a node's containerd holds."""
    out = nodes.ctr(node, "images", "list", check=False, timeout=60).stdout.splitlines()[1:]
    found = {}
    for line in out:
        cols = line.split()
        if len(cols) >= 3:
            found[cols[0]] = cols[2]
    return found


def _pooled(tar: tarfile.TarFile, member: tarfile.TarInfo) -> Path:
    """The pool's file for one blob of an archive, written (and its digest checked) when the pool lacks it."""
    digest = member.name.rsplit("/", 1)[1]
    archive = os.fsdecode(tar.name or "the archive")  # typed str | bytes: never show a b'...' in an error
    pooled = nodes.BLOB_POOL / digest
    if pooled.exists():
        return pooled
    source = tar.extractfile(member)
    if source is None:
        raise ValueError(f"{archive}: {member.name} is not a file")
    nodes.BLOB_POOL.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=nodes.BLOB_POOL, prefix=".tmp-", delete=False) as out:
        hasher = hashlib.sha256()
        while chunk := source.read(1 << 20):
            hasher.update(chunk)
            out.write(chunk)
    if hasher.hexdigest() != digest:
        os.unlink(out.name)
        raise ValueError(f"{archive}: {member.name} holds content of digest sha256:{hasher.hexdigest()}")
    os.replace(out.name, pooled)
    return pooled


def _ingest(node: str, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
    """One blob of an archive into a node's content store: a hard link to the pool's file, recorded by digest."""
    pooled = _pooled(tar, member)
    own = nodes.blob_dir(node) / pooled.name
    if not own.exists():
        own.parent.mkdir(parents=True, exist_ok=True)
        os.link(pooled, own)
    size, ref = f"--expected-size={member.size}", f"tabjob-import-{pooled.name}"
    argv = [*nodes.ctr_argv(node), "content", "ingest", f"--expected-digest=sha256:{pooled.name}", size, ref]
    # containerd records a blob its store already holds without reading it, but its writer then says the blob is
    # complete and ctr seeks its input to the end: the input must be a file, so it is the blob itself (the pool's
    # name for it, which the node's garbage collector cannot take away between the link and this call).
    with open(pooled, "rb") as blob:
        proc = subprocess.run(argv, stdin=blob, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"ctr content ingest of {member.name} into {node} failed: {proc.stderr.strip()}")


def prune_pool() -> list[str]:
    """Remove the pool's blobs that no node's content store links any more (their containerd collected them),
    and what an interrupted import left; returns the digests removed. Call it with no import running."""
    removed = []
    for path in nodes.BLOB_POOL.glob("*") if nodes.BLOB_POOL.exists() else []:
        if path.name.startswith(".tmp-"):
            path.unlink()
        elif path.stat().st_nlink == 1:
            path.unlink()
            removed.append(path.name)
    return removed


IMPORT_ATTEMPTS = 3


def _import_archive(node: str, archive: Archive) -> None:
    """Every blob of `archive` (see _ingest), then the image named in its index, unpacked.

    `ctr content ingest` holds no lease, so until the image names them the ingested blobs are garbage to the
    node's collector, which runs whenever anything on the node deletes (a pod, an image): it can take a blob
    between the ingest and the import ("content digest ... not found"). The import then ingests again and retries;
    once the image is in, it holds its blobs."""
    with tarfile.open(archive.path) as tar, tempfile.TemporaryDirectory() as tmp:
        index_only = Path(tmp) / "index.tar"
        blobs = [m for m in tar.getmembers() if m.name.startswith("blobs/sha256/")]
        with tarfile.open(index_only, "w") as out:
            for member in tar.getmembers():
                if member.name in ("index.json", "oci-layout"):
                    data = tar.extractfile(member)
                    assert data is not None
                    _add(out, member.name, data.read())
        for attempt in range(1, IMPORT_ATTEMPTS + 1):
            for member in blobs:
                _ingest(node, tar, member)
            # Unpacking here, not at the first pod, keeps pod start-up fast.
            proc = nodes.ctr(node, "images", "import", str(index_only), check=False)
            if proc.returncode == 0:
                return
            collected = "not found" in proc.stderr
            if not collected or attempt == IMPORT_ATTEMPTS:
                raise RuntimeError(
                    f"ctr images import of {archive.path} on {node} failed: {proc.stderr.strip()}{_room_hint(proc)}"
                )
            print(f"  {node}: a blob was collected before the import named it; ingesting again", flush=True)
            time.sleep(1)  # let the collector finish its sweep
            _unlink_collected(node, blobs)


def _room_hint(proc: subprocess.CompletedProcess[str]) -> str:
    """What to free when the import ran out of disk: each cluster slot in use keeps its nodes' unpacked images."""
    if "no space left on device" not in proc.stderr:
        return ""
    free_gib = shutil.disk_usage(nodes.BLOB_POOL).free / 2**30
    in_use = [slot for slot in range(network.SLOTS) if network.taken(slot)]
    return (
        f"\n{free_gib:.1f} GiB free under {nodes.BLOB_POOL.parent}; network slots in use: {in_use} (`ip netns list`),"
        " each with its three nodes' unpacked images (about 7 GiB a node for the trainer): stop the other clusters"
        " (make cluster-down in their checkouts) or free room elsewhere"
    )


def _unlink_collected(node: str, blobs: list[tarfile.TarInfo]) -> None:
    """Drop the node's link to each blob its store no longer lists: the collector removes the record first and the
    file after, and an ingest over a file whose record is gone does not record it again; a fresh link does."""
    listed = set(nodes.ctr(node, "content", "ls", "--quiet", timeout=60).stdout.split())
    for member in blobs:
        digest = member.name.removeprefix("blobs/sha256/")
        if f"sha256:{digest}" not in listed:
            (nodes.blob_dir(node) / digest).unlink(missing_ok=True)


def _config_name(node: str, manifest_digest: str) -> str | None:
    """The name containerd's CRI gives an image besides its tags (its id: the config's digest), read from the node."""
    proc = nodes.ctr(node, "content", "get", manifest_digest, check=False, timeout=60)
    if proc.returncode != 0:
        return None
    config = json.loads(proc.stdout).get("config") or {}
    return str(config["digest"]) if "digest" in config else None


def _remove_superseded(node: str, id_name: str) -> None:
    """Remove an image version that a new import replaced under its tag: the CRI's id name still holds it, and
    with it a code change's layers (or, when the third-party layer changed, 5 GB a node) forever. Synchronously,
    so the node's collector frees its blobs and snapshots now; those of running containers stay theirs."""
    names = nodes.ctr(node, "images", "list", "--quiet", timeout=60).stdout.split()
    if id_name in names:
        nodes.ctr(node, "images", "rm", "--sync", id_name)


def import_all(node: str, archives: list[Archive]) -> list[str]:
    """Import into `node` what it lacks, and remove the versions the imports replace; returns the refs imported."""
    have = present(node)
    imported = []
    for archive in archives:
        if have.get(archive.ref) == archive.manifest_digest():
            continue
        superseded = _config_name(node, have[archive.ref]) if archive.ref in have else None
        _import_archive(node, archive)
        if archive.ref not in present(node):
            raise RuntimeError(
                f"importing {archive.path} into {node} gave no image named {archive.ref}: the archive's index must"
                " name it (annotation io.containerd.image.name or a full org.opencontainers.image.ref.name)"
            )
        if superseded is not None and superseded != archive.config_digest():
            _remove_superseded(node, superseded)
        imported.append(archive.ref)
    return imported
