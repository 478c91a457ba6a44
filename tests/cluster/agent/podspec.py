"""Turn a pod spec into what a local process needs: environment variables and volume directories.

Volumes are materialised as host directories under the pod's directory (configMap, secret, emptyDir, projected
service-account tokens, downwardAPI), or point at existing host paths (hostPath, and the directory the agent
provisioned for a persistentVolumeClaim). launch.py then bind-mounts each at its mountPath inside a private mount
namespace, so the container sees the paths its spec names.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
from pathlib import Path
from typing import Any

from tests.cluster.kube import ApiError, Kube
from tests.cluster.paths import VENV_BIN


class NotReadyYet(Exception):
    """Something the pod refers to is missing (a ConfigMap, an unbound claim); kubelet would retry."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _get(kube: Kube, path: str) -> dict[str, Any] | None:
    return kube.get(path, ok_missing=True)


def _configmap_data(kube: Kube, ns: str, name: str, optional: bool) -> dict[str, bytes] | None:
    cm = _get(kube, f"/api/v1/namespaces/{ns}/configmaps/{name}")
    if cm is None:
        if optional:
            return None
        raise NotReadyYet("CreateContainerConfigError", f'configmap "{name}" not found')
    data = {k: v.encode() for k, v in (cm.get("data") or {}).items()}
    data.update({k: base64.b64decode(v) for k, v in (cm.get("binaryData") or {}).items()})
    return data


def _secret_data(kube: Kube, ns: str, name: str, optional: bool) -> dict[str, bytes] | None:
    secret = _get(kube, f"/api/v1/namespaces/{ns}/secrets/{name}")
    if secret is None:
        if optional:
            return None
        raise NotReadyYet("CreateContainerConfigError", f'secret "{name}" not found')
    return {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}


def field_value(pod: dict[str, Any], path: str) -> str:
    """The downward API's fieldRef paths."""
    meta, spec, status = pod["metadata"], pod["spec"], pod.get("status", {})
    m = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if m:
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    simple = {
        "metadata.name": meta["name"],
        "metadata.namespace": meta["namespace"],
        "metadata.uid": meta["uid"],
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": status.get("podIP", ""),
        "status.hostIP": status.get("hostIP", ""),
        "status.podIPs": ",".join(ip["ip"] for ip in status.get("podIPs", [])),
        "status.hostIPs": ",".join(ip["ip"] for ip in status.get("hostIPs", [])),
        "metadata.labels": "\n".join(f'{k}="{v}"' for k, v in sorted((meta.get("labels") or {}).items())),
        "metadata.annotations": "\n".join(f'{k}="{v}"' for k, v in sorted((meta.get("annotations") or {}).items())),
    }
    if path not in simple:
        raise NotReadyYet("CreateContainerConfigError", f"unsupported fieldRef {path}")
    return simple[path]


_QUANTITY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")
_SUFFIX = {
    "": 1,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}


def _quantity(q: str) -> float:
    m = _QUANTITY.match(str(q))
    if not m:
        return 0.0
    return float(m.group(1)) * _SUFFIX.get(m.group(2), 1)


def _resource_value(container: dict[str, Any], ref: dict[str, Any]) -> str:
    kind, _, res = ref["resource"].partition(".")
    value = (container.get("resources", {}).get(kind) or {}).get(res)
    if value is None:  # kubelet falls back to node allocatable; one core / 1Gi is a fair stand-in here
        value = "1" if res == "cpu" else "1Gi"
    divisor = _quantity(ref.get("divisor") or "1") or 1.0  # the API server defaults an absent divisor to "0"
    return str(math.ceil(_quantity(value) / divisor))


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: known names are replaced, $$ escapes, anything else stays literal."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", sub, text)


def base_env(pod: dict[str, Any], api_port: int) -> dict[str, str]:
    """What every container gets before its own env: a usable PATH with the project's virtualenv first, and the
    in-cluster API address (the API server itself, since there is no service proxy here)."""
    return {
        "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '/usr/local/bin:/usr/bin:/bin')}",
        "HOME": os.environ.get("HOME", "/root"),
        "HOSTNAME": pod_hostname(pod),
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(api_port),
        "KUBERNETES_SERVICE_PORT_HTTPS": str(api_port),
        "KUBERNETES_PORT": f"tcp://127.0.0.1:{api_port}",
    }


def pod_hostname(pod: dict[str, Any]) -> str:
    return str(pod["spec"].get("hostname") or pod["metadata"]["name"])[:63]


def container_env(kube: Kube, pod: dict[str, Any], container: dict[str, Any], api_port: int) -> dict[str, str]:
    ns = pod["metadata"]["namespace"]
    env = base_env(pod, api_port)
    for src in container.get("envFrom", []):
        prefix = src.get("prefix", "")
        if "configMapRef" in src:
            ref = src["configMapRef"]
            cm = _configmap_data(kube, ns, ref["name"], ref.get("optional", False)) or {}
            env.update({prefix + k: v.decode() for k, v in cm.items()})
        elif "secretRef" in src:
            ref = src["secretRef"]
            data = _secret_data(kube, ns, ref["name"], ref.get("optional", False)) or {}
            env.update({prefix + k: v.decode() for k, v in data.items()})
    for var in container.get("env", []):
        name, source = var["name"], var.get("valueFrom")
        if source is None:
            env[name] = expand(var.get("value", ""), env)
        elif "fieldRef" in source:
            env[name] = field_value(pod, source["fieldRef"]["fieldPath"])
        elif "resourceFieldRef" in source:
            env[name] = _resource_value(container, source["resourceFieldRef"])
        elif "configMapKeyRef" in source or "secretKeyRef" in source:
            is_cm = "configMapKeyRef" in source
            ref = source["configMapKeyRef" if is_cm else "secretKeyRef"]
            fetch = _configmap_data if is_cm else _secret_data
            values = fetch(kube, ns, ref["name"], ref.get("optional", False))
            if values is None or ref["key"] not in values:
                if ref.get("optional", False):
                    continue
                kind = "configmap" if is_cm else "secret"
                raise NotReadyYet(
                    "CreateContainerConfigError", f"couldn't find key {ref['key']} in {kind} {ns}/{ref['name']}"
                )
            env[name] = values[ref["key"]].decode()
    return env


def _write_files(target: Path, data: dict[str, bytes], items: list[dict[str, Any]] | None, mode: int) -> None:
    chosen = [(i["key"], i["path"], i.get("mode", mode)) for i in items] if items else [(k, k, mode) for k in data]
    for key, rel, file_mode in chosen:
        if key not in data:
            continue
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data[key])
        path.chmod(file_mode)


def _service_account_token(kube: Kube, pod: dict[str, Any], source: dict[str, Any]) -> bytes:
    """A bound token from the TokenRequest API, as kubelet gets it: tied to this pod's name and uid."""
    meta = pod["metadata"]
    spec: dict[str, Any] = {
        "expirationSeconds": source.get("expirationSeconds", 3607),
        "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": meta["name"], "uid": meta["uid"]},
    }
    if source.get("audience"):
        spec["audiences"] = [source["audience"]]
    sa = pod["spec"].get("serviceAccountName", "default")
    try:
        resp = kube.create(f"/api/v1/namespaces/{meta['namespace']}/serviceaccounts/{sa}/token", {"spec": spec})
    except ApiError as exc:
        raise NotReadyYet("CreateContainerConfigError", f"token request for {sa}: {exc}") from exc
    return str(resp["status"]["token"]).encode()


def _projected(kube: Kube, pod: dict[str, Any], vol: dict[str, Any], target: Path) -> None:
    ns, mode = pod["metadata"]["namespace"], vol.get("defaultMode", 0o644)
    for src in vol.get("sources", []):
        if "serviceAccountToken" in src:
            sat = src["serviceAccountToken"]
            _write_files(
                target, {"t": _service_account_token(kube, pod, sat)}, [{"key": "t", "path": sat["path"]}], mode
            )
        elif "configMap" in src:
            ref = src["configMap"]
            data = _configmap_data(kube, ns, ref["name"], ref.get("optional", False))
            if data is not None:
                _write_files(target, data, ref.get("items"), mode)
        elif "secret" in src:
            ref = src["secret"]
            data = _secret_data(kube, ns, ref["name"], ref.get("optional", False))
            if data is not None:
                _write_files(target, data, ref.get("items"), mode)
        elif "downwardAPI" in src:
            _downward(pod, src["downwardAPI"], target, mode)


def _downward(pod: dict[str, Any], vol: dict[str, Any], target: Path, mode: int) -> None:
    for item in vol.get("items", []):
        if "fieldRef" in item:
            _write_files(
                target,
                {"v": field_value(pod, item["fieldRef"]["fieldPath"]).encode()},
                [{"key": "v", "path": item["path"]}],
                item.get("mode", mode),
            )


def claim_path(kube: Kube, ns: str, claim: str) -> Path:
    pvc = _get(kube, f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{claim}")
    if pvc is None:
        raise NotReadyYet("ContainerCreating", f'persistentvolumeclaim "{claim}" not found')
    pv_name = pvc["spec"].get("volumeName")
    pv = _get(kube, f"/api/v1/persistentvolumes/{pv_name}") if pv_name else None
    if pv is None or pvc.get("status", {}).get("phase") != "Bound":
        raise NotReadyYet("ContainerCreating", f'persistentvolumeclaim "{claim}" is not bound')
    source = pv["spec"].get("hostPath") or pv["spec"].get("local")
    if not source:
        raise NotReadyYet("ContainerCreating", f"persistentvolume {pv_name} is neither hostPath nor local")
    return Path(source["path"])


def materialise_volumes(kube: Kube, pod: dict[str, Any], pod_dir: Path) -> dict[str, Path]:
    """Host directory for every volume of the pod, written now (configMap/secret contents are a snapshot)."""
    ns = pod["metadata"]["namespace"]
    paths: dict[str, Path] = {}
    for vol in pod["spec"].get("volumes", []):
        name, target = vol["name"], pod_dir / "volumes" / vol["name"]
        if "hostPath" in vol:
            paths[name] = Path(vol["hostPath"]["path"])
            if vol["hostPath"].get("type") in ("DirectoryOrCreate", None, ""):
                paths[name].mkdir(parents=True, exist_ok=True)
            continue
        if "persistentVolumeClaim" in vol:
            paths[name] = claim_path(kube, ns, vol["persistentVolumeClaim"]["claimName"])
            continue
        target.mkdir(parents=True, exist_ok=True)
        paths[name] = target
        if "configMap" in vol:
            ref = vol["configMap"]
            data = _configmap_data(kube, ns, ref["name"], ref.get("optional", False))
            _write_files(target, data or {}, ref.get("items"), ref.get("defaultMode", 0o644))
        elif "secret" in vol:
            ref = vol["secret"]
            data = _secret_data(kube, ns, ref["secretName"], ref.get("optional", False))
            _write_files(target, data or {}, ref.get("items"), ref.get("defaultMode", 0o644))
        elif "projected" in vol:
            _projected(kube, pod, vol["projected"], target)
        elif "downwardAPI" in vol:
            _downward(pod, vol["downwardAPI"], target, vol["downwardAPI"].get("defaultMode", 0o644))
        elif "emptyDir" not in vol:
            raise NotReadyYet("CreateContainerConfigError", f"volume {name}: unsupported volume type")
    return paths


def mounts(container: dict[str, Any], volumes: dict[str, Path], env: dict[str, str]) -> list[dict[str, Any]]:
    out = []
    for vm in container.get("volumeMounts", []):
        src = volumes[vm["name"]]
        sub = vm.get("subPath") or expand(vm.get("subPathExpr", ""), env)
        if sub:
            src = src / sub
            if not src.exists():
                src.mkdir(parents=True)  # kubelet creates a missing subPath as a directory
        out.append({"src": str(src), "dst": vm["mountPath"], "ro": bool(vm.get("readOnly", False))})
    return out


def launch_plan(
    container: dict[str, Any],
    env: dict[str, str],
    mounts_: list[dict[str, Any]],
    cwd: str,
    hostname: str,
    hosts_file: Path,
    termination_log: Path,
) -> dict[str, Any]:
    argv = [expand(a, env) for a in container.get("command", []) + container.get("args", [])]
    if not container.get("command"):
        # No image, so no entrypoint to fall back on: the spec must say what to run.
        raise NotReadyYet(
            "CreateContainerConfigError",
            "container has no command; tests/cluster runs processes, images are not emulated",
        )
    term_path = container.get("terminationMessagePath") or "/dev/termination-log"
    all_mounts = [
        *mounts_,
        {"src": str(termination_log), "dst": term_path, "ro": False, "file": True},
        {"src": str(hosts_file), "dst": "/etc/hosts", "ro": True, "file": True},
    ]
    return {
        "argv": argv,
        "env": env,
        "cwd": container.get("workingDir") or cwd,
        "hostname": hostname,
        "mounts": all_mounts,
    }


def dump(plan: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(plan))
