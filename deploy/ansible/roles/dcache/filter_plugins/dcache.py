"""Filters of the dcache role: what a head's log says it runs, compared with
what was asked.

The plugin logs, for each DCACHE export, the settings it runs once they are
in force (ganesha-dcache-config(8), docs/configuration.md "Live changes"):

  DCACHE: export 2 (/srv/data) created over VFS: IO_Cache_Read = direct, ... (running: io_uring)
  DCACHE: export 2 (/srv/data) updated: IO_Cache_Read = dontcache, ... (running: io_uring)
  DCACHE: export 2 (/srv/data): IO_Cache_Write = "fast" is not valid; ...;
      update refused, the export keeps its current settings

Values are printed as the plugin reads them (modes by name, booleans as
true/false), so a wanted value is normalised the same way before comparing
(IO_Cache_Write = 4 is direct_file_sync, yes is true).
"""
import re

# Every DCACHE setting, in the plugin's order, and which of them a live
# update cannot bring into force (they apply when ganesha.nfsd starts: the
# core's export_update, fsal_dcache/core/export_state.cpp; a unit test keeps
# the two lists equal).
SETTINGS = ("IO_Cache_Read", "IO_Cache_Write", "Direct_Misaligned_Num_Pages",
            "Direct_Misaligned_Dontcache", "Direct_Misaligned_Memory", "Boundary_Tracking",
            "Boundary_Max_Pages", "Boundary_Max_Age_Ms", "IO_Backend", "IO_Queue_Depth",
            "Cached_Read_Fast_Path", "IO_Blocking_Max", "IO_Workers_Max", "Auto_Read_Stream",
            "Auto_Write_Stream", "Auto_Stream_Min_MiB", "Auto_Stream_Yield_Ms",
            "Auto_Write_Spare_Memory")
RESTART_ONLY = ("IO_Backend", "IO_Queue_Depth")
MODES = ("IO_Cache_Read", "IO_Cache_Write")
MODE_NUMBERS = {"0": "buffered", "1": "dontcache", "2": "direct",
                "3": "direct_data_sync", "4": "direct_file_sync"}
BOOLEANS = ("Direct_Misaligned_Dontcache", "Boundary_Tracking", "Cached_Read_Fast_Path")
BOOL_WORDS = {"true": "true", "yes": "true", "on": "true", "1": "true",
              "false": "false", "no": "false", "off": "false", "0": "false"}
_CANON = {s.lower(): s for s in SETTINGS}


def canonical(name):
    return _CANON.get(str(name).lower(), str(name))


def normal(name, value):
    """value as the plugin logs it for setting name."""
    name = canonical(name)
    if isinstance(value, bool):
        value = "true" if value else "false"
    value = str(value).strip().lower()
    if name in MODES:
        return MODE_NUMBERS.get(value, value)
    if name in BOOLEANS:
        return BOOL_WORDS.get(value, value)
    return value


def dcache_events(text, export_id):
    """The plugin's lines about export_id in text (a log or part of one), in
    order: [{event: created|updated|refused, settings: {NAME: value}, line}]."""
    marker = f"DCACHE: export {int(export_id)} ("
    settled = re.compile(rf"^DCACHE: export {int(export_id)} \(.*\) (created over \w+|updated): "
                         r"(.*) \(running: [^)]*\)$")
    events = []
    for line in str(text).splitlines():
        i = line.find(marker)
        if i < 0:
            continue
        message = line[i:].strip()
        m = settled.match(message)
        if m:
            settings = {}
            for item in m.group(2).split(", "):
                name, _, value = item.partition(" = ")
                settings[canonical(name.strip())] = value.strip()
            events.append({"event": "updated" if m.group(1) == "updated" else "created",
                           "settings": settings, "line": message})
        elif "update refused" in message or "export refused" in message:
            events.append({"event": "refused", "settings": {}, "line": message})
    return events


def dcache_last_event(text, export_id, kinds=("created", "updated", "refused")):
    """The last of dcache_events of the given kinds, or {event: none}."""
    found = [e for e in dcache_events(text, export_id) if e["event"] in kinds]
    return found[-1] if found else {"event": "none", "settings": {}, "line": ""}


def dcache_differs(running, wanted):
    """The wanted settings the running ones do not match, each as
    'NAME = running (asked: VALUE)'."""
    out = []
    for name, value in dict(wanted).items():
        have = dict(running).get(canonical(name))
        if have is None or normal(name, have) != normal(name, value):
            out.append(f"{canonical(name)} = {have if have is not None else '?'} (asked: {value})")
    return out


def _wanted(exports):
    return {int(e["export_id"]): dict(e["settings"]) for e in exports}


def dcache_to_reload(exports, changed_settings, log_text):
    """The Export_Ids to reload: those whose settings changed in the file,
    and those the head does not run as asked (the file held them already
    but was never reloaded, or the log no longer says)."""
    ids = []
    for export_id, wanted in _wanted(exports).items():
        running = dcache_last_event(log_text, export_id, ("created", "updated"))["settings"]
        if dict(changed_settings).get(str(export_id)) or dcache_differs(running, wanted):
            ids.append(export_id)
    return ids


def dcache_reload_answered(text, ids):
    """Whether the plugin said, for every id, that it took or refused the update."""
    return all(dcache_last_event(text, i, ("updated", "refused"))["event"] != "none" for i in ids)


def dcache_reload_problems(text, exports, ids, reload_results=()):
    """Why the reload of ids did not bring exports' settings into force
    (empty: it did), from the log written since the reload and the DBus
    replies (the handler's results)."""
    wanted = _wanted(exports)
    replies = {int(r["item"]): r for r in reload_results if "item" in r}
    problems = []
    for export_id in ids:
        last = dcache_last_event(text, export_id, ("updated", "refused"))
        if last["event"] == "refused":
            problems.append(f"export {export_id} refused the update: {last['line']}")
        elif last["event"] == "updated":
            differ = dcache_differs(last["settings"], wanted.get(export_id, {}))
            if differ:
                problems.append(f"export {export_id} runs {', '.join(differ)} after the reload: {last['line']}")
        else:
            why = f"export {export_id}: no 'DCACHE: export {export_id} (...) updated' line in the log after the reload"
            reply = replies.get(export_id, {})
            said = " ".join(str(reply.get("stderr") or reply.get("msg") or "").split())
            if reply.get("rc", 0) != 0 and said:
                why += f"; DBus UpdateExport: {said[:300]}"
            crit = [ln for ln in str(text).splitlines() if " :CRIT :" in ln or " :MAJ :" in ln]
            if crit:
                why += f"; the log says: {re.split(r' :(?:CRIT|MAJ) :', crit[0], maxsplit=1)[-1].strip()}"
            problems.append(why)
    return problems


def dcache_running(text, ids):
    """The plugin's last line about each id in text (what it runs, or its refusal)."""
    out = []
    for export_id in ids:
        last = dcache_last_event(text, export_id)
        out.append(last["line"] or f"export {export_id}: no line from the plugin")
    return out


def dcache_unknown(settings):
    return [n for n in dict(settings) if str(n).lower() not in _CANON]


def dcache_restart_only(settings):
    return [n for n in dict(settings) if canonical(n) in RESTART_ONLY]


def dcache_needs_restart(changed_settings):
    """The restart-only settings among those the edit changed
    ({export id: [names]}), as 'export N: NAME'."""
    return [f"export {i}: {canonical(n)}" for i, names in dict(changed_settings).items() for n in names
            if canonical(n) in RESTART_ONLY]


def dcache_rolled_heads(hostvars, hosts, this):
    """The heads of hosts rolled before this one in this run (the role sets
    dcache_rolled on each head it rolled)."""
    return [h for h in hosts if h != this and h in hostvars and hostvars[h].get("dcache_rolled")]


class FilterModule:
    def filters(self):
        return {"dcache_events": dcache_events, "dcache_last_event": dcache_last_event,
                "dcache_differs": dcache_differs, "dcache_to_reload": dcache_to_reload,
                "dcache_reload_answered": dcache_reload_answered,
                "dcache_reload_problems": dcache_reload_problems, "dcache_running": dcache_running,
                "dcache_unknown": dcache_unknown, "dcache_restart_only": dcache_restart_only,
                "dcache_needs_restart": dcache_needs_restart, "dcache_rolled_heads": dcache_rolled_heads}
