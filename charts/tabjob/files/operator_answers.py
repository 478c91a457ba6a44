# The `helm test` check, run with `python -c` in the operator image (standard library only).
# Lists the operator's pods through the API and calls /healthz and /metrics on each Ready one by pod IP.
import json
import os
import ssl
import sys
import time
import urllib.parse
import urllib.request

SA = "/var/run/secrets/kubernetes.io/serviceaccount"
selector, namespace = os.environ["SELECTOR"], os.environ["NAMESPACE"]
api = f"https://{os.environ['KUBERNETES_SERVICE_HOST']}:{os.environ['KUBERNETES_SERVICE_PORT']}"
ctx = ssl.create_default_context(cafile=f"{SA}/ca.crt")
with open(f"{SA}/token") as f:
    token = f.read().strip()


def ready_pods():
    url = f"{api}/api/v1/namespaces/{namespace}/pods?labelSelector={urllib.parse.quote(selector)}"
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
        pods = json.load(resp)["items"]
    for pod in pods:
        conditions = {c["type"]: c["status"] for c in pod["status"].get("conditions") or []}
        if conditions.get("Ready") == "True" and pod["status"].get("podIP"):
            ports = {p["name"]: p["containerPort"] for c in pod["spec"]["containers"] for p in c.get("ports") or []}
            yield pod["metadata"]["name"], pod["status"]["podIP"], ports


def get(url):
    # The operator may still be starting its endpoints right after a rollout; a few retries cover that.
    for attempt in range(10):
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                return resp.status, resp.read().decode()
        except OSError as exc:
            if attempt == 9:
                sys.exit(f"FAIL: {url}: {exc}")
            time.sleep(2)


deadline = time.monotonic() + 60
while not (found := list(ready_pods())):
    if time.monotonic() > deadline:
        sys.exit(f"FAIL: no Ready operator pod in {namespace} with labels {selector}")
    time.sleep(2)

for name, ip, ports in found:
    host = f"[{ip}]" if ":" in ip else ip
    status, _ = get(f"http://{host}:{ports['health']}/healthz")
    print(f"{name} ({ip}): /healthz {status}")
    if "metrics" in ports:
        status, body = get(f"http://{host}:{ports['metrics']}/metrics")
        if "# TYPE" not in body:
            sys.exit(f"FAIL: {name}: /metrics did not return Prometheus text")
        print(f"{name} ({ip}): /metrics {status}, {len(body.splitlines())} lines")
print(f"OK: {len(found)} operator pod(s) answer")
