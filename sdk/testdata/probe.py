"""What the Python SDK makes of the answers of sdk/vocabulary_test.go's
fake server, printed as one JSON document for the test to compare with
the Go and TypeScript SDKs and with sdk/vocabulary.json.

usage: python3 probe.py URL (with sdk/python on PYTHONPATH)
"""

import datetime
import hashlib
import json
import os
import sys

import cordon
from cordon import RetryPolicy, Sandbox

URL = sys.argv[1]
os.environ.pop("CORDON_URL", None)


def public(obj):
    return sorted(n for n in dir(obj) if not n.startswith("_"))


def error_doc(err):
    doc = {"class": type(err).__name__, "chain": [c.__name__ for c in type(err).__mro__ if issubclass(c, cordon.CordonError)]}
    fields = [n for n in public(err) if n not in ("args", "with_traceback", "add_note", "result")]
    doc["fields"] = fields
    for name in fields:
        value = getattr(err, name)
        if name == "outcome":
            value = {"status": value.get("status")}
        doc[name] = value
    return doc


def run(fn):
    try:
        return {"result": fn()}
    except cordon.CordonError as err:
        return {"error": error_doc(err)}


def result_doc(r):
    return {"fields": sorted(vars(r)), "status": r.status, "exit_code": r.exit_code, "stdout": r.stdout, "stderr": r.stderr}


def entry_doc(e):
    t = e.modified_time
    return {
        "name": e.name,
        "path": e.path,
        "type": e.type,
        "size": e.size,
        "mode": e.mode,
        "modified_time": t.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if t else None,
        "symlink_target": e.symlink_target,
    }


no_retry = RetryPolicy(max_retries=0)
out = {
    "defaults": {
        "url": cordon.DEFAULT_URL,
        "max_retries": RetryPolicy().max_retries,
        "max_wait": RetryPolicy().max_wait,
    },
    "errors": {},
    "exec": {},
}
for status in (400, 401, 403, 404, 409, 410, 413, 423, 429, 500, 503):
    out["errors"][str(status)] = run(lambda: Sandbox.connect("sb-%d" % status, url=URL, token="t", retry=no_retry).info)

Sandbox.create(agent="a", envs={"A": "1"}, timeout=90, url=URL, token="t", retry=no_retry)
sb = Sandbox.connect("sb-ok", url=URL, token="t", retry=no_retry)
for case in sys.stdin.read().split():
    res = run(lambda: result_doc(sb.commands.run([case])))
    out["exec"][case] = res

entries = sb.files.list("/d")
out["entries"] = [entry_doc(e) for e in entries]
def done(fn):
    try:
        fn()
        return "<nil>"
    except cordon.CordonError as err:
        return str(err)


out["files"] = {
    "info": entry_doc(sb.files.get_info("/d/a.txt")),
    "exists": sb.files.exists("/d/a.txt"),
    "missing": sb.files.exists("/d/missing"),
    "made": sb.files.make_dir("/d/new"),
    "removed": done(lambda: sb.files.remove("/d/old")),
    "renamed": done(lambda: sb.files.rename("/d/a.txt", "/d/b.txt")),
    "port_url": sb.port_url(8080, expires_in=300),
}
h = sb.commands.run(["bg"], background=True)
try:
    r, waited = h.wait(), False
except cordon.CommandExitError as e:
    r, waited = e.result, True
out["files"]["bg"] = {"id": h.id, "wait_error": waited, "exit_code": r.exit_code, "stdout": r.stdout, "kill": done(h.kill)}
out["files"]["bg_listed"] = len(sb.commands.list())
tar = sb.files.read_tar("/d")
out["files"]["tar_sha256"] = hashlib.sha256(tar).hexdigest()
out["files"]["tar_cut"] = done(lambda: sb.files.read_tar("/cut")) != "<nil>"
out["files"]["tar_entries"] = sb.files.write_tar("/d", tar)["entries"]
watch = sb.files.watch_dir("/d", recursive=True)
out["files"]["watch"] = {"events": [[e.type, e.name, e.is_dir] for e in watch], "end_reason": watch.end_reason}
out["members"] = {
    "Sandbox": sorted(set(public(sb)) | {n for n in ("create", "connect", "list") if hasattr(Sandbox, n)}),
    "Commands": public(sb.commands),
    "Files": public(sb.files),
    "EntryInfo": sorted(n for n in vars(entries[0]) if n != "raw"),
    "RetryPolicy": sorted(vars(RetryPolicy())),
    "Terminal": public(cordon.Terminal),
    "CommandHandle": public(h),
    "WatchHandle": public(watch),
    "FilesystemEvent": sorted(vars(cordon.FilesystemEvent("create"))),
}
out["listed"] = [s["id"] for s in Sandbox.list(url=URL, token="t")]

told = []
policy = RetryPolicy(max_retries=2, max_wait=30.0, on_retry=lambda attempt, wait, err: told.append([attempt, wait, type(err).__name__]))
retried = run(lambda: Sandbox.connect("sb-429", url=URL, token="t", retry=policy).info)
out["retry"] = {"told": told, "error": retried["error"]["class"], "retry_after": retried["error"]["retry_after"]}
json.dump(out, sys.stdout, sort_keys=True, default=str)
