"""Certificates for the test control plane, made the way controller-runtime's envtest makes them.

One self-signed CA signs everything: the API server's serving certificate (127.0.0.1, localhost and the in-cluster
names), client certificates (the admin user in system:masters, the API server's client for the kubelet endpoint)
and the node agent's kubelet serving certificate. The service-account signing key pair is separate. Keys are
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


SERVING_SANS = ",".join(
    [
        "IP:127.0.0.1",
        "IP:10.0.0.1",
        "DNS:localhost",
        "DNS:kubernetes",
        "DNS:kubernetes.default",
        "DNS:kubernetes.default.svc",
        "DNS:kubernetes.default.svc.cluster.local",
    ]
)


def make_all(pki: Path) -> None:
    """Write ca, apiserver, admin, kubelet-client, kubelet-serving and sa key pairs into `pki`."""
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
    _signed("apiserver", "/CN=kube-apiserver", pki, sans=SERVING_SANS, usage="serverAuth")
    _signed("admin", "/O=system:masters/CN=tabjob-admin", pki, usage="clientAuth")
    _signed("kubelet-client", "/O=system:masters/CN=kube-apiserver-kubelet-client", pki, usage="clientAuth")
    _signed("kubelet", "/CN=tabjob-kubelet", pki, sans="IP:127.0.0.1,DNS:localhost", usage="serverAuth")
    _key("sa", pki)
    _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
