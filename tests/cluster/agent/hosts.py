"""Name resolution for pods: one hosts file per pod, bind-mounted over /etc/hosts inside its mount namespace.

There is no cluster DNS. Instead each pod's hosts file lists what kubelet puts there (its own hostname) plus what
cluster DNS would answer for pods under a headless Service: `<hostname>.<subdomain>.<ns>.svc[.cluster.local]`,
and the shorter `<hostname>.<subdomain>` forms the DNS search path gives within the same namespace. Files are
rewritten in place (same inode) when pods come and go, so running processes see new peers at once.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

BASE = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
DOMAIN = "cluster.local"


@dataclass(frozen=True)
class PodName:
    namespace: str
    name: str
    hostname: str
    subdomain: str
    ip: str


class HostsFiles:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pods: dict[str, tuple[PodName, Path]] = {}  # uid -> (names, its hosts file)
        self.headless: set[tuple[str, str]] = set()  # (namespace, service name) of headless Services

    def add(self, uid: str, pod: PodName, path: Path) -> None:
        with self._lock:
            self._pods[uid] = (pod, path)
        self.refresh()

    def remove(self, uid: str) -> None:
        with self._lock:
            self._pods.pop(uid, None)
        self.refresh()

    def set_headless(self, services: set[tuple[str, str]]) -> None:
        if services != self.headless:
            self.headless = services
            self.refresh()

    def render(self, me: PodName) -> str:
        lines = [BASE]
        if me.subdomain:
            fqdn = f"{me.hostname}.{me.subdomain}.{me.namespace}.svc.{DOMAIN}"
            lines.append(f"{me.ip}\t{fqdn} {me.hostname}\n")
        else:
            lines.append(f"{me.ip}\t{me.hostname}\n")
        for other, _ in sorted(self._pods.values(), key=lambda p: (p[0].namespace, p[0].name)):
            if other == me or not other.subdomain or (other.namespace, other.subdomain) not in self.headless:
                continue
            svc = f"{other.hostname}.{other.subdomain}.{other.namespace}.svc"
            names = [f"{svc}.{DOMAIN}", svc, f"{other.hostname}.{other.subdomain}.{other.namespace}"]
            if other.namespace == me.namespace:
                names.append(f"{other.hostname}.{other.subdomain}")
            lines.append(f"{other.ip}\t{' '.join(names)}\n")
        return "".join(lines)

    def refresh(self) -> None:
        with self._lock:
            for me, path in self._pods.values():
                text = self.render(me)
                try:
                    if path.exists() and path.read_text() == text:
                        continue
                    with open(path, "a+") as f:  # in place: a bind mount follows the inode, not the name
                        f.seek(0)
                        f.truncate()
                        f.write(text)
                except OSError:
                    pass  # the pod is being torn down
