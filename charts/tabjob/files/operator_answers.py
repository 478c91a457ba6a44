# The `helm test` check, run with `python -c` in the operator image (standard library only).
# Finds the operator pods behind the metrics Service and calls /healthz and /metrics on each ready one.
import json
import os
import ssl
import sys
import time
import urllib.request

SA = "/var/run/secrets/kubernetes.io/serviceaccount"
service, namespace = os.environ["SERVICE"], os.environ["NAMESPACE"]
api = f"https://{os.environ['KUBERNETES_SERVICE_HOST']}:{os.environ['KUBERNETES_SERVICE_PORT']}"
ctx = ssl.create_default_context(cafile=f"{SA}/ca.crt")
with open(f"{SA}/token") as f:
    token = f.read().strip()


def ready_endpoints():
    url = (f"{api}/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"
           f"?labelSelector=kubernetes.io/service-name%3D{service}")
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
        slices = json.load(resp)["items"]
    for s in slices:
        ports = {p.get("name"): p["port"] for p in s.get("ports") or []}
        for ep in s.get("endpoints") or []:
            if (ep.get("conditions") or {}).get("ready"):
                for ip in ep["addresses"]:
                    yield ip, ports


# The Service's endpoints can trail the Deployment's rollout by a few seconds.
deadline = time.monotonic() + 60
while not (found := list(ready_endpoints())):
    if time.monotonic() > deadline:
        sys.exit(f"FAIL: service {namespace}/{service} has no ready endpoint: no operator pod is Ready")
    time.sleep(2)

for ip, ports in found:
    host = f"[{ip}]" if ":" in ip else ip
    with urllib.request.urlopen(f"http://{host}:{ports['health']}/healthz", timeout=10) as resp:
        print(f"operator {ip}: /healthz {resp.status}")
    with urllib.request.urlopen(f"http://{host}:{ports['metrics']}/metrics", timeout=10) as resp:
        body = resp.read().decode()
    if "# TYPE" not in body:
        sys.exit(f"FAIL: operator {ip}: /metrics did not return Prometheus text")
    print(f"operator {ip}: /metrics {resp.status}, {len(body.splitlines())} lines")
print(f"OK: {len(found)} operator pod(s) answer")
