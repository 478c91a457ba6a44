"""Certificates for the test control plane, made the way controller-runtime's envtest makes them.

One self-signed CA signs everything: the API server's serving certificate (127.0.0.1, its address on the cluster
network, the `kubernetes` Service's ClusterIP and the in-cluster names), client certificates (the admin user in
system:masters, the API server's client for the kubelet endpoint, its front-proxy client for aggregated APIs)
and, per node, the kubelet's serving certificate
(its node IP, which `kubectl logs`/`exec` connect to) and client certificate (system:node:<name> in system:nodes,
what the Node authorizer and NodeRestriction expect). The service-account signing key pair is separate. Keys are
ECDSA P-256 because they are generated on every `make cluster` and RSA generation is slow on two cores.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

DAYS = "30"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _key(name: str, pki: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", f"{name}.key", cwd=pki)


def _signed(name: str, subject: str, pki: Path, *, sans: str = "", usage: str = "serverAuth,clientAuth") -> None:
    """A leaf certificate for `name` signed by the CA."""
    _key(name, pki)
    ext = [f"extendedKeyUsage={usage}", "keyUsage=critical,digitalSignature,keyEncipherment"]
    if sans:
        ext.append(f"subjectAltName={sans}")
    (pki / f"{name}.ext").write_text("\n".join(ext) + "\n")
    _openssl("req", "-new", "-key", f"{name}.key", "-subj", subject, "-out", f"{name}.csr", cwd=pki)
    _openssl(
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        DAYS,
        "-extfile",
        f"{name}.ext",
        "-out",
        f"{name}.crt",
        cwd=pki,
    )


SERVING_NAMES = [
    "DNS:localhost",
    "DNS:kubernetes",
    "DNS:kubernetes.default",
    "DNS:kubernetes.default.svc",
    "DNS:kubernetes.default.svc.cluster.local",
]


def make_all(pki: Path, apiserver_ips: list[str], nodes: dict[str, str]) -> None:
    """Write ca, apiserver, admin, kubelet-client and sa key pairs into `pki`, and per node (name -> IP) its
    kubelet serving (`<name>-serving`) and client (`<name>-client`) pairs."""
    pki.mkdir(parents=True, exist_ok=True)
    _key("ca", pki)
    _openssl(
        "req",
        "-x509",
        "-new",
        "-key",
        "ca.key",
        "-subj",
        "/CN=tabjob-test-ca",
        "-days",
        DAYS,
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        "-out",
        "ca.crt",
        cwd=pki,
    )
    sans = ",".join([f"IP:{ip}" for ip in ["127.0.0.1", *apiserver_ips]] + SERVING_NAMES)
    _signed("apiserver", "/CN=kube-apiserver", pki, sans=sans, usage="serverAuth")
    _signed("admin", "/O=system:masters/CN=tabjob-admin", pki, usage="clientAuth")
    _signed("kubelet-client", "/O=system:masters/CN=kube-apiserver-kubelet-client", pki, usage="clientAuth")
    # The aggregation layer's client: the API server proxies Kueue's visibility API (an APIService) with it.
    _signed("front-proxy-client", "/CN=front-proxy-client", pki, usage="clientAuth")
    for name, ip in nodes.items():
        _signed(f"{name}-serving", f"/CN={name}", pki, sans=f"IP:{ip},DNS:{name}", usage="serverAuth")
        _signed(f"{name}-client", f"/O=system:nodes/CN=system:node:{name}", pki, usage="clientAuth")
    _key("sa", pki)
    _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
