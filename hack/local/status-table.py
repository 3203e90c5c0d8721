#!/usr/bin/env python3
"""The closing table of hack/local-up.sh: every sample object, its state and what it did in Coder.

Reads `kubectl get -o json` lists (one JSON document per argument file, or `-` for stdin) of the samples and prints
one line per object: OBJECT, STATE (phase and the Ready reason, or the first condition that is not met) and IN CODER
(what the object made in Coder, or, when it is not ready, why in one line).

  status-table.py [--real-coder] [--wait-check] LIST.json...
    --wait-check   print nothing; exit 0 when every object is ready (with --real-coder: ready, or held by a known
                   limit of the open-source server), 1 otherwise (local-up polls with it)
    --real-coder   the objects ran against the open-source Coder server: explain the ones it cannot serve
    --aggregated-skipped   (with --real-coder) the aggregated samples were not applied: Coder has no Terraform

Exit status without --wait-check: as with it.
"""

import json
import sys

# The objects local-up applies, in the order of the table: (kind, name). A missing one is a row that says so.
EXPECTED = [
    ("CoderControlPlane", "codercontrolplane-sample"),
    ("CoderProvisioner", "coderprovisioner-sample"),
    ("CoderWorkspaceProxy", "coderworkspaceproxy-sample"),
    ("CoderTemplateTest", "codertemplatetest-sample"),
    ("CoderAIProvider", "coderaiprovider-sample"),
    ("CoderAIGatewayKey", "coderaigatewaykey-sample"),
    ("CoderMCPServer", "codermcpserver-sample"),
    ("CoderTemplate", "coder.sample"),
    ("CoderWorkspace", "coder.coder-k8s-operator.sample"),
]

# Why the open-source Coder server cannot serve an object, by (kind, reason of the unmet condition). The reasons are
# the controllers' own (docs/controllers/); the text says what is missing and where it would come from.
OPEN_SOURCE_LIMITS = {
    ("CoderProvisioner", "NotSupported"): "needs a Premium licence (external provisioner daemons): "
    "the open-source server has no entitlements or provisioner key routes",
    ("CoderAIGatewayKey", "NotSupported"): "needs a Premium licence with the AI Gateway: "
    "the open-source server has no AI Gateway key routes",
    ("CoderAIProvider", "NotSupported"): "needs a Coder with the AI providers API: "
    "v2.30.0 has no /api/v2/ai/providers route",
    ("CoderMCPServer", "NotSupported"): "needs Coder v2.37.2 or later (MCP server configs): "
    "v2.30.0 has no /api/v2/organizations/{org}/mcp-servers route",
    ("CoderTemplateTest", "WaitingForAgents"): "needs a workspace agent that connects: the workspace was built, "
    "but no workspace runs on this machine to start its agent",
}
# The aggregated samples when local-up could not apply them (--aggregated-skipped).
NO_TERRAFORM = "not applied: the template imports with Terraform, and no terraform 1.4 to 1.14 is on PATH here"


def load(paths):
    items = []
    for path in paths:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
        if text.strip():
            items.extend(json.loads(text).get("items", []))
    return {(o.get("kind"), o["metadata"]["name"]): o for o in items}


def conditions(obj):
    return {c.get("type"): c for c in obj.get("status", {}).get("conditions", []) or []}


def unmet(obj):
    """The first condition that is not met: Ready not True, Stalled or Reconciling True, any other condition False.
    Unknown is not applicable (say LicenseApplied without a licence), so it does not count."""
    for c in obj.get("status", {}).get("conditions", []) or []:
        kind, value = c.get("type"), c.get("status")
        if kind in ("Stalled", "Reconciling"):
            if value == "True":
                return c
        elif kind == "Ready":
            if value != "True":
                return c
        elif value == "False":
            return c
    return None


def is_ready(obj):
    status = obj.get("status", {})
    kind = obj.get("kind")
    if kind == "CoderTemplate":
        return bool(status.get("activeVersionID"))
    if kind == "CoderWorkspace":
        want = "running" if obj.get("spec", {}).get("running") else "stopped"
        return status.get("latestBuildStatus") == want
    if status.get("observedGeneration") != obj["metadata"].get("generation"):
        return False
    if kind == "CoderTemplateTest":
        return status.get("phase") == "Succeeded" and conditions(obj).get("Ready", {}).get("status") == "True"
    return status.get("phase") == "Ready" and unmet(obj) is None


def state(obj):
    status = obj.get("status", {})
    kind = obj.get("kind")
    if kind == "CoderTemplate":
        return "Imported" if status.get("activeVersionID") else "NotImported"
    if kind == "CoderWorkspace":
        return "build " + (status.get("latestBuildStatus") or "unknown")
    phase = status.get("phase") or "NoStatus"
    missing = unmet(obj)
    if missing is not None:
        return f"{phase} ({missing.get('type')}: {missing.get('reason')})"
    ready = conditions(obj).get("Ready")
    return f"{phase} ({ready.get('reason')})" if ready else phase


def in_coder(obj):
    """What a ready object made or keeps in Coder."""
    s = obj.get("status", {})
    spec = obj.get("spec", {})
    kind = obj.get("kind")
    if kind == "CoderControlPlane":
        secret = (s.get("operatorTokenSecretRef") or {}).get("name", "?")
        return f"operator user coder-k8s-operator, its token in Secret {secret}; Coder at {s.get('url', '?')}"
    if kind == "CoderProvisioner":
        return (f"provisioner key {s.get('organizationName', '?')}/{s.get('provisionerKeyName', '?')} "
                f"(ID {s.get('provisionerKeyID', '?')}), {s.get('readyReplicas', 0)} daemon(s)")
    if kind == "CoderWorkspaceProxy":
        secret = (s.get("proxyTokenSecretRef") or {}).get("name", "?")
        if spec.get("bootstrap"):
            return f"workspace proxy registered, its token in Secret {secret}"
        return (f"nothing (direct mode): {s.get('readyReplicas', 0)} proxy pod(s) send the token of Secret "
                f"{secret} to {spec.get('primaryAccessURL', '?')}")
    if kind == "CoderTemplateTest":
        return (f"workspace {s.get('workspaceName', '?')} of template {spec.get('template', '?')} "
                f"(version {s.get('templateVersionName', '?')}) built, agents ready, deleted in {s.get('duration', '?')}")
    if kind == "CoderAIProvider":
        return f"AI provider {spec.get('name', '?')} ({spec.get('type', '?')}, ID {s.get('providerID', '?')})"
    if kind == "CoderAIGatewayKey":
        key = s.get("currentKey") or {}
        secret = (s.get("secretRef") or {}).get("name", "?")
        return f"AI Gateway key {key.get('name', '?')} (ID {key.get('id', '?')}), its value in Secret {secret}"
    if kind == "CoderMCPServer":
        return (f"MCP server config {spec.get('organization', '?')}/{spec.get('slug') or obj['metadata']['name']} "
                f"(ID {s.get('serverID', '?')})")
    if kind == "CoderTemplate":
        return f"template {obj['metadata']['name']} (version {s.get('activeVersionID', '?')})"
    if kind == "CoderWorkspace":
        return (f"workspace {s.get('ownerName', '?')}/{obj['metadata']['name'].split('.')[-1]} of template "
                f"{s.get('templateName', '?')}, latest build {s.get('latestBuildStatus', '?')}")
    return ""


def limit_of(obj):
    """The open-source server's limit that keeps the object from being ready, if it is a known one."""
    missing = unmet(obj)
    return OPEN_SOURCE_LIMITS.get((obj.get("kind"), missing.get("reason") if missing else None))


def why_not(obj, real_coder):
    """One line on why an object is not ready."""
    missing = unmet(obj)
    if real_coder and limit_of(obj) is not None:
        return limit_of(obj)
    message = (missing or {}).get("message") or obj.get("status", {}).get("message") or "no status yet"
    return "not ready: " + " ".join(message.split())[:160]


def main(argv):
    real_coder = "--real-coder" in argv
    wait_check = "--wait-check" in argv
    skipped = real_coder and "--aggregated-skipped" in argv
    objects = load([a for a in argv if not a.startswith("--")])
    rows = []
    all_ready = all_settled = True
    for kind, name in EXPECTED:
        obj = objects.get((kind, name))
        if obj is None and skipped and kind in ("CoderTemplate", "CoderWorkspace"):
            all_ready = False
            rows.append((f"{kind}/{name}", "Skipped", NO_TERRAFORM))
            continue
        if obj is None:
            all_ready = all_settled = False
            rows.append((f"{kind}/{name}", "Missing", "not applied"))
            continue
        ready = is_ready(obj)
        explained = real_coder and limit_of(obj) is not None
        all_ready &= ready
        all_settled &= ready or explained
        rows.append((f"{kind}/{name}", state(obj), in_coder(obj) if ready else why_not(obj, real_coder)))
    if wait_check:
        return 0 if all_settled else 1
    widths = [max(len(r[i]) for r in rows + [("OBJECT", "STATE", "IN CODER")]) for i in range(2)]
    for row in [("OBJECT", "STATE", "IN CODER")] + rows:
        print(f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]}")
    return 0 if all_settled else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
