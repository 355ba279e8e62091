#!/usr/bin/python3
"""Ansible module: a Ganesha head's whole configuration file checked, and
what the head serves against it; the head's clients; a restarted head
waited for.

  action=check     dcache-check -v on the file as it is: its refusals (the
                   plugin's lines, with the allowed values) are problems;
                   then every DCACHE export it would serve must be served
                   (DBus ShowExports), listed by dcache-stats (served
                   through DCACHE), and run the settings the file gives it
                   (the plugin's last "created over VFS" / "updated" line
                   in the log, compared with dcache-check's "would be
                   served" line: both are the plugin's own format). Exports
                   in `pending` may run other settings (they are about to
                   be reloaded). Fails with every problem and its cause.
  action=clients   the client addresses the head knows (DBus ShowClients)
  action=wait      after a restart: until ganesha.nfsd answers on DBus, is
                   out of its grace period and every address of `clients`
                   is back, then action=check

No stock module reads ganesha.nfsd's DBus replies or the plugin's lines.
"""
import json
import re
import shlex
import time

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: dcache_head
short_description: Check a Ganesha head's whole configuration and what it serves
options:
  action: {description: check, clients or wait, type: str, default: check}
  path: {description: the configuration file, type: path, required: true}
  log: {description: ganesha.nfsd's log file, type: path, required: true}
  check: {description: the dcache-check command, type: str, default: dcache-check}
  stats: {description: the dcache-stats command ('' skips that check), type: str, default: dcache-stats}
  dbus_address: {description: the bus ganesha.nfsd is on ('' the system bus), type: str, default: ''}
  pending: {description: Export_Ids whose settings may differ from the file, type: list, elements: int, default: []}
  clients: {description: addresses to wait for (action=wait), type: list, elements: str, default: []}
  timeout: {description: seconds action=wait waits, type: int, default: 300}
  label: {description: what the messages call the file's state (before the roll, ...), type: str, default: ''}
"""

WOULD = re.compile(r"DCACHE: export (\d+) \((.*?)\): would be served: (.*)$")
SETTLED = re.compile(r"DCACHE: export (\d+) \(.*?\) (?:created over \w+|updated): (.*) \(running: [^)]*\)$")
REFUSED = re.compile(r"DCACHE: export (\d+) \(.*?\): .*(?:export refused|update refused.*)$")
ADDRESS = re.compile(r'^\s*string "((?:\d{1,3}\.){3}\d{1,3}|[0-9a-fA-F:]*:[0-9a-fA-F:.]+)"\s*$', re.M)


def would_serve(out):
    """dcache-check -v's standard output -> {export id: (path, settings text)}."""
    found = {}
    for line in out.splitlines():
        m = WOULD.search(line)
        if m:
            found[int(m.group(1))] = (m.group(2), m.group(3))
    return found


def show_exports_ids(reply):
    """DBus ShowExports' reply (dbus-send --print-reply) -> set of Export_Ids."""
    return {int(i) for i in re.findall(r"^\s*uint16 (\d+)\s*$", reply, re.M)}


def show_clients(reply):
    """DBus ShowClients' reply -> the client addresses, sorted."""
    return sorted(set(ADDRESS.findall(reply)))


def in_grace(reply):
    """get_grace's reply -> True / False (None: no answer it could read)."""
    m = re.search(r"^\s*boolean (true|false)", reply, re.M)
    return None if not m else m.group(1) == "true"


def last_events(log_text):
    """{export id: (settings, refusal)}: the settings text of the plugin's
    last "created over" / "updated" line about each export (None: none in
    the log), and its refusal after that line (None: none)."""
    events = {}
    for line in log_text.splitlines():
        m = SETTLED.search(line)
        if m:
            events[int(m.group(1))] = (m.group(2), None)
            continue
        m = REFUSED.search(line)
        if m:
            export_id = int(m.group(1))
            events[export_id] = (events.get(export_id, (None, None))[0], line[line.index("DCACHE: export"):])
    return events


def problems(check_rc, check_out, check_err, served, stats, log_text, pending=()):
    """Why the head does not run its file (empty: it does).

    served    Export_Ids ganesha.nfsd serves (None: it did not answer; then
              the reason is in stats or the caller's message)
    stats     {export id: counters} from dcache-stats, a string (why it
              failed) or None (not asked)"""
    out = []
    if check_rc != 0:
        lines = [s for s in check_err.splitlines() if s.strip()]
        out.append(f"dcache-check refuses the file (exit {check_rc}): " + " / ".join(lines or ["no output"]))
        return out
    would = would_serve(check_out)
    events = last_events(log_text)
    for export_id, (path, settings) in sorted(would.items()):
        running, refusal = events.get(export_id, (None, None))
        cause = f"; the head's last line about it: {refusal}" if refusal else ""
        if served is not None and export_id not in served:
            out.append(f"export {export_id} ({path}) is not served (ganesha.nfsd serves "
                       f"{', '.join(map(str, sorted(served))) or 'none'}){cause or '; nothing about it in the log'}")
            continue
        if isinstance(stats, str):
            out.append(f"dcache-stats fails: {stats}")
            stats = None
        elif stats is not None and str(export_id) not in stats:
            out.append(f"dcache-stats lists no DCACHE counters for export {export_id} ({path}): the head does not "
                       f"serve it through DCACHE{cause}")
            continue
        if export_id in pending:
            continue
        if running is not None and running != settings:
            out.append(f"export {export_id} ({path}) runs {running}; the file gives it {settings}: the file was "
                       f"changed and not reloaded (reload or restart the head, or roll that export){cause}")
        elif running is None and refusal:
            out.append(f"export {export_id} ({path}) does not run the file's settings{cause}")
    return out


def run(module, argv, env=None):
    rc, out, err = module.run_command(argv, environ_update=env or {})
    return rc, out, err


def dbus(module, env, obj, method):
    return run(module, ["dbus-send", "--system", "--print-reply", "--reply-timeout=10000", "--dest=org.ganesha.nfsd",
                        f"/org/ganesha/nfsd/{obj}", f"org.ganesha.nfsd.{method}"], env)


def check(module, p, env):
    rc, out, err = run(module, shlex.split(p["check"]) + ["-v", p["path"]])
    served = None
    src, reply, derr = dbus(module, env, "ExportMgr", "exportmgr.ShowExports")
    found = []
    if src != 0:
        found.append(f"ganesha.nfsd does not answer ShowExports on DBus: {derr.strip() or reply.strip()}")
    else:
        served = show_exports_ids(reply)
    stats = None
    if p["stats"] and served is not None:
        s_rc, s_out, s_err = run(module, shlex.split(p["stats"]) + ["--json"], env)
        if s_rc != 0:
            stats = s_err.strip() or f"exit {s_rc}"
        else:
            try:
                stats = json.loads(s_out)
            except ValueError:
                stats = f"unreadable output: {s_out[:200]}"
    try:
        with open(p["log"], "rb") as f:
            log_bytes = f.read()
        log_text = log_bytes.decode("utf-8", "replace")
    except OSError as e:
        module.fail_json(msg=f"cannot read {p['log']} ({e.strerror}): the role reads the plugin's lines about each "
                             "export there (dcache_ganesha_log; a LOG { Facility { name = FILE; ... } } block or "
                             "ganesha.nfsd -L)")
    found += problems(rc, out, err, served, stats, log_text, set(p["pending"]))
    return found, would_serve(out), log_text, len(log_bytes)


def wait(module, p, env):
    """Until ganesha.nfsd answers, is out of grace and knows every client
    of p['clients'] again (within p['timeout']); what it waited for."""
    deadline = time.monotonic() + p["timeout"]
    waited = {"dbus": None, "grace": None, "clients": None}
    t0 = time.monotonic()
    while True:
        rc, reply, _ = dbus(module, env, "admin", "admin.get_grace")
        if rc == 0 and in_grace(reply) is not None:
            waited["dbus"] = waited["dbus"] or round(time.monotonic() - t0, 1)
            if not in_grace(reply):
                waited["grace"] = round(time.monotonic() - t0, 1)
                break
        if time.monotonic() > deadline:
            module.fail_json(msg=f"ganesha.nfsd {'is still in grace' if waited['dbus'] else 'does not answer on DBus'}"
                             f" {p['timeout']} s after its restart", waited=waited)
        time.sleep(0.5)
    missing = list(p["clients"])
    while missing:
        rc, reply, _ = dbus(module, env, "ClientMgr", "clientmgr.ShowClients")
        have = show_clients(reply) if rc == 0 else []
        missing = [c for c in p["clients"] if c not in have]
        if not missing:
            break
        if time.monotonic() > deadline:
            module.fail_json(msg=f"clients {', '.join(missing)} not back {p['timeout']} s after the restart",
                             waited=waited)
        time.sleep(0.5)
    waited["clients"] = round(time.monotonic() - t0, 1)
    return waited


def main():
    module = AnsibleModule(argument_spec={
        "action": {"type": "str", "default": "check", "choices": ["check", "clients", "wait"]},
        "path": {"type": "path", "required": True},
        "log": {"type": "path", "required": True},
        "check": {"type": "str", "default": "dcache-check"},
        "stats": {"type": "str", "default": "dcache-stats"},
        "dbus_address": {"type": "str", "default": ""},
        "pending": {"type": "list", "elements": "int", "default": []},
        "clients": {"type": "list", "elements": "str", "default": []},
        "timeout": {"type": "int", "default": 300},
        "label": {"type": "str", "default": ""},
    }, supports_check_mode=True)
    p = module.params
    env = {"DBUS_SYSTEM_BUS_ADDRESS": p["dbus_address"]} if p["dbus_address"] else {}
    if p["action"] == "clients":
        rc, reply, err = dbus(module, env, "ClientMgr", "clientmgr.ShowClients")
        if rc != 0:
            module.fail_json(msg=f"ganesha.nfsd does not answer ShowClients on DBus: {err.strip()}")
        module.exit_json(changed=False, clients=show_clients(reply))
    waited = wait(module, p, env) if p["action"] == "wait" else None
    found, would, log_text, log_size = check(module, p, env)
    running = {str(k): v[1] for k, v in would.items()}
    if found:
        label = f" ({p['label']})" if p["label"] else ""
        module.fail_json(msg=f"{p['path']}{label}: " + "; ".join(found), problems=found, running=running,
                         waited=waited)
    # where the log ends now, and the plugin's lines in it (what each export
    # runs): the role's reload reads the log from there
    module.exit_json(changed=False, running=running, waited=waited, log_size=log_size,
                     log_lines="\n".join(s for s in log_text.splitlines() if "DCACHE: export " in s),
                     msg=f"{p['path']}: {len(would)} DCACHE exports served as the file says")


if __name__ == "__main__":
    main()
