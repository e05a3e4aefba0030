#!/usr/bin/env python3
"""Calls every method aria2p's Client has, and drives aria2p's command line, against downloader-server (issue #50).
Each call either works or is one of the differences by design that README.md lists (BitTorrent and Metalink, the
queue's order, a download's URIs); the last call is aria2.shutdown, after which the server must exit.

Usage: aria2p-api-check.py PORT SECRET URL (a slow file, so that it is still active when asked)
"""
import json
import subprocess
import sys
import time

import aria2p

port, secret, url = int(sys.argv[1]), sys.argv[2], sys.argv[3]
client = aria2p.Client(host="http://127.0.0.1", port=port, secret=secret)
BY_DESIGN = {"add_torrent", "add_metalink", "get_peers", "change_position", "change_uri"}
checked = []


def works(name, *args):
    result = getattr(client, name)(*args)
    checked.append(name)
    return result


def refused(name, *args):
    try:
        getattr(client, name)(*args)
    except aria2p.ClientException as error:
        assert error.code == -32601, (name, error.code, error.message)  # not found: not offered
        checked.append(name)
        return
    raise SystemExit(f"{name} was expected to be refused (by design)")


gid = works("add_uri", [url])
deadline = time.time() + 30
while works("tell_status", gid, ["status"])["status"] != "active" and time.time() < deadline:
    time.sleep(0.1)
assert works("tell_status", gid, ["status"])["status"] == "active", "the download never ran"
for name, args in [
    ("get_uris", [gid]), ("get_files", [gid]), ("get_servers", [gid]), ("tell_active", []),
    ("tell_waiting", [0, 10]), ("tell_stopped", [0, 10]), ("get_option", [gid]), ("get_global_option", []),
    ("get_global_stat", []), ("get_version", []), ("get_session_info", []), ("save_session", []),
    ("list_methods", []), ("list_notifications", []),
]:
    works(name, *args)
works("change_option", gid, works("get_option", gid))  # its own options back: accepted
works("change_global_option", {"max-concurrent-downloads": "3"})
assert works("pause", gid) == gid and works("unpause", gid) == gid
assert works("force_pause", gid) == gid and works("unpause", gid) == gid
assert works("pause_all") == "OK" and works("unpause_all") == "OK"
assert works("force_pause_all") == "OK" and works("unpause_all") == "OK"
results = works("multicall", [{"methodName": "aria2.tellStatus", "params": [gid, ["gid"]]},
                               {"methodName": "aria2.getVersion", "params": []}])
assert results[0][0]["gid"] == gid, results
results = works("multicall2", [("aria2.tellStatus", [gid, ["gid"]]), ("aria2.getVersion", [])])
assert results[0][0]["gid"] == gid, results
answers = works("batch_call", [("aria2.tellStatus", [gid, ["gid"]], 1), ("aria2.getVersion", [], 2)])
assert len(answers) == 2, answers
assert works("remove", gid) == gid
works("remove_download_result", gid)
second = works("add_uri", [url], {"pause": "true"})
assert works("force_remove", second) == second
assert works("purge_download_result") == "OK"
for name, args in [("add_torrent", ["dG9ycmVudA==", []]), ("add_metalink", ["bWV0YWxpbms="]), ("get_peers", [gid]),
                   ("change_position", [gid, 0, "POS_SET"]), ("change_uri", [gid, 1, [], [url]])]:
    refused(name, *args)

# The command line, as its users type it.
cli = ["aria2p", "-p", str(port), "-s", secret]
out = subprocess.run(cli + ["add", url], check=True, capture_output=True, text=True).stdout
added = out.split()[-1]
assert len(added) == 16, out
for command in (["pause", added], ["resume", added], ["show"], ["call", "getVersion"], ["remove", added],
                ["purge"]):
    done = subprocess.run(cli + command, capture_output=True, text=True)
    assert done.returncode == 0, (command, done.stdout, done.stderr)
    checked.append("cli " + command[0])

unlisted = set(aria2p.Client.METHODS) - set(client.list_methods())
assert unlisted == {"aria2.addTorrent", "aria2.addMetalink", "aria2.getPeers", "aria2.changePosition",
                    "aria2.changeUri"}, unlisted
missing = {m for m in dir(aria2p.Client) if m.islower() and not m.startswith("_")
           and callable(getattr(aria2p.Client, m))} - set(checked) - {
    "call", "get_params", "get_payload", "post", "res_or_raise", "response_as_exception",  # helpers, not calls
    "listen_to_notifications", "stop_listening",  # aria2p-check.py
    "shutdown", "force_shutdown",  # below: the service stops
}
assert not missing, f"not checked: {missing}"
print(f"aria2p API: {len(checked)} calls and commands checked; by design not offered: {sorted(BY_DESIGN)}", flush=True)
assert client.shutdown() == "OK"
