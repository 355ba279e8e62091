#!/usr/bin/python3
"""Ansible module: set DCACHE settings in the FSAL { Name = DCACHE; } block
of given exports of a Ganesha configuration file, and NFS_CORE_PARAM
settings (core: the metrics' Enable_Metrics and Monitoring_Port), changing
no other byte.

No stock module fits: lineinfile and replace match lines or regular
expressions, not "this statement inside the DCACHE block of the EXPORT whose
Export_Id is N" (every export has the same setting names, a block may sit on
one line, a value may be quoted, a name may be in any case).  The text is
tokenised as Ganesha's parser reads it (comments, quoted strings, %include
lines) and only the value of each statement, or a new statement after
`Name = DCACHE;`, is spliced in.

The candidate file is written beside the real one (so that dcache-check
resolves a relative %include as ganesha.nfsd does), validated, and only
then moved over the real one (backup first, attributes kept) -- the way
copy's and lineinfile's validate= work.
"""
import os
import re
import shlex
import tempfile

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: dcache_settings
short_description: Set DCACHE settings in chosen EXPORT blocks of ganesha.conf
options:
  path: {description: the configuration file, type: path, required: true}
  exports:
    description: [export_id (int) and settings (a dict NAME -> value; bools and ints allowed)]
    type: list
    elements: dict
    default: []
  core:
    description: [NFS_CORE_PARAM settings (a dict NAME -> value), set in the file's one NFS_CORE_PARAM block,
                  or in one added at its end; Ganesha reads them only when it starts]
    type: dict
  validate: {description: command run on the candidate file (%s) before it replaces path, type: str}
  backup: {description: keep the previous file beside it (its name is returned), type: bool, default: false}
"""

TOKEN = re.compile(r'''(?P<space>\s+)|(?P<comment>\#[^\n]*)|(?P<punct>[{};=,])|'''
                   r'''(?P<word>"(?:\\.|[^"\\])*"|'[^']*'|[^\s{};=,#"']+)''')
# a value as one word: a sign is kept, so that dcache-check judges it and
# says what the setting allows (Direct_Misaligned_Num_Pages = -1); '.' and
# ':' for addresses (NFS_CORE_PARAM's Monitoring_Addr)
WORD = re.compile(r"[+-]?[A-Za-z0-9_.:]+")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class EditError(Exception):
    pass


def tokens(text):
    pos = 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            raise EditError(f"cannot read the text at offset {pos} ({text[pos:pos + 20]!r})")
        if m.lastgroup in ("punct", "word"):
            yield m.group(), m.start(), m.end()
        pos = m.end()


def parse_blocks(text):
    """Config text -> nodes.  A block: {name, start, children}; a statement:
    {name, start, vstart, vend, end, value} (value span; end after its ';');
    a directive (%include FILE): {name, start, directive}."""
    toks = list(tokens(text))
    i = 0

    def level(depth):
        nonlocal i
        nodes = []
        while i < len(toks):
            tok, start, end = toks[i]
            if tok == "}":
                if depth == 0:
                    raise EditError(f"unbalanced '}}' at offset {start}")
                i += 1
                return nodes
            if tok.startswith("%"):
                nodes.append({"name": tok, "start": start, "directive": True})
                i += 2
                continue
            nxt = toks[i + 1][0] if i + 1 < len(toks) else None
            if nxt == "{":
                i += 2
                nodes.append({"name": tok, "start": start, "children": level(depth + 1)})
            elif nxt == "=":
                i += 2
                values = []
                while i < len(toks) and toks[i][0] not in (";", "}"):
                    values.append(toks[i])
                    i += 1
                # no value (`Name = ;`): one is put where it belongs, before the ';'
                here = toks[i][1] if i < len(toks) else toks[i - 1][2]
                vstart, vend = (values[0][1], values[-1][2]) if values else (here, here)
                stop = vend
                if i < len(toks) and toks[i][0] == ";":
                    stop = toks[i][2]
                    i += 1
                nodes.append({"name": tok, "start": start, "vstart": vstart, "vend": vend,
                              "end": stop, "value": " ".join(v[0] for v in values)})
            else:
                raise EditError(f"unexpected {tok!r} at offset {start}")
        if depth != 0:
            raise EditError("a block is not closed (missing '}')")
        return nodes

    return level(0)


def unquote(value):
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'" else value


def statements(block, name):
    return [n for n in block["children"] if "value" in n and n["name"].lower() == name.lower()]


def blocks(nodes, name):
    return [n for n in nodes if "children" in n and n["name"].lower() == name.lower()]


def config_value(name, value):
    """A setting's value as written in the file: one word."""
    if isinstance(value, bool):           # YAML's yes/true
        return "true" if value else "false"
    text = str(value)
    if not WORD.fullmatch(text):
        raise EditError(f"{name} = {text!r}: a value is one word of letters, digits, '_', '.' and ':' "
                        "(ganesha-dcache-config(8) lists what each setting allows)")
    return text


def dcache_block(top, export_id):
    exports = [b for b in blocks(top, "EXPORT")
               if any(unquote(s["value"]) == str(export_id) for s in statements(b, "Export_Id"))]
    if len(exports) != 1:
        hint = ""
        if not exports and any(n.get("directive") for n in top):
            hint = " (the file has %include/%dir/%url lines: only this file is edited)"
        raise EditError(f"{len(exports)} EXPORT blocks with Export_Id = {export_id}, need exactly 1{hint}")
    found = [b for b in blocks(exports[0]["children"], "FSAL")
             if any(unquote(s["value"]).upper() == "DCACHE" for s in statements(b, "Name"))]
    if len(found) != 1:
        raise EditError(f"EXPORT {export_id} has {len(found)} FSAL {{ Name = DCACHE; }} blocks, need exactly 1")
    return found[0]


def set_statements(text, block, values, where):
    """The edits setting values (NAME -> value) in block: a statement's value
    replaced, a missing one added after anchor (a statement of the block,
    or, with anchor None, before the block's closing brace); returns
    (edits, names changed)."""
    edits, names, added = [], [], ""
    anchor = block.get("anchor")
    line_start = text.rfind("\n", 0, anchor["start"]) + 1
    indent = text[line_start:anchor["start"]]
    for name, value in values.items():
        if not NAME.fullmatch(name):
            raise EditError(f"{name!r} is not a setting name")
        value = config_value(name, value)
        found = statements(block, name)
        if len(found) > 1:
            raise EditError(f"{name} is set {len(found)} times in {where}")
        if found:
            if found[0]["value"] != value:
                edits.append((found[0]["vstart"], found[0]["vend"], value))
                names.append(name)
        elif indent.strip() == "":        # the anchor on a line of its own
            added += f"\n{indent}{name} = {value};"
            names.append(name)
        else:                             # a block on one line
            added += f" {name} = {value};"
            names.append(name)
    if added:
        edits.append((anchor["end"], anchor["end"], added))
    return edits, names


def core_edits(text, top, values):
    """The edits setting NFS_CORE_PARAM values: in the file's block, or in a
    block added at its end when it has none (and no %include, whose file
    could hold one: Ganesha refuses a second)."""
    found = blocks(top, "NFS_CORE_PARAM")
    if len(found) > 1:
        raise EditError(f"{len(found)} NFS_CORE_PARAM blocks, Ganesha allows 1")
    if not found:
        if any(n.get("directive") for n in top):
            raise EditError("no NFS_CORE_PARAM block here, and the file has %include/%dir/%url lines: "
                            "set it where the block is (Ganesha allows one)")
        lines = "".join(f"  {name} = {config_value(name, value)};\n" for name, value in values.items())
        sep = "" if not text or text.endswith("\n") else "\n"
        return [(len(text), len(text), f"{sep}NFS_CORE_PARAM {{\n{lines}}}\n")], list(values)
    block = found[0]
    if not block["children"]:
        raise EditError("the NFS_CORE_PARAM block is empty: write one setting in it first")
    block["anchor"] = block["children"][-1]
    if "value" not in block["anchor"]:
        raise EditError("NFS_CORE_PARAM ends with a sub-block: put a setting last")
    return set_statements(text, block, values, "NFS_CORE_PARAM")


def edit(text, exports, core=None):
    """Returns (new text, {export_id: [names whose text changed]}), with
    changed["core"] the NFS_CORE_PARAM names when core is given."""
    top = parse_blocks(text)
    edits, changed = [], {}
    if core:
        edits, changed["core"] = core_edits(text, top, core)
    for export in exports:
        export_id = export["export_id"]
        block = dcache_block(top, export_id)
        block["anchor"] = statements(block, "Name")[0]   # new settings after `Name = DCACHE;`
        more, changed[export_id] = set_statements(text, block, export["settings"],
                                                  f"EXPORT {export_id}'s DCACHE block")
        edits += more
    for start, end, new in sorted(edits, key=lambda e: e[0], reverse=True):
        text = text[:start] + new + text[end:]
    return text, changed


def check_exports(exports):
    seen = set()
    for export in exports:
        if set(export) != {"export_id", "settings"}:
            raise EditError(f"an export is {{export_id: N, settings: {{NAME: VALUE}}}}, not {export!r}")
        try:
            export["export_id"] = int(export["export_id"])
        except (TypeError, ValueError):
            raise EditError(f"export_id {export['export_id']!r} is not a number") from None
        if export["export_id"] in seen:
            raise EditError(f"export {export['export_id']} is given twice")
        seen.add(export["export_id"])
        if not isinstance(export["settings"], dict) or not export["settings"]:
            raise EditError(f"export {export['export_id']}: settings must be a non-empty dict")
        lower = [n.lower() for n in export["settings"]]
        if len(set(lower)) != len(lower):
            raise EditError(f"export {export['export_id']}: a setting is given twice")


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "exports": {"type": "list", "elements": "dict", "default": []},
            "core": {"type": "dict"},
            "validate": {"type": "str"},
            "backup": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    path = module.params["path"]
    exports = module.params["exports"]
    try:
        check_exports(exports)
        with open(path, "rb") as f:
            old_bytes = f.read()
        # surrogateescape: bytes that are not UTF-8 are written back as they were
        old = old_bytes.decode("utf-8", "surrogateescape")
        new, changed = edit(old, exports, module.params["core"])
    except (EditError, OSError) as e:
        module.fail_json(msg=f"{path}: {e}")
    result = {"changed": new != old, "path": path,
              "changed_settings": {str(k): v for k, v in changed.items()}}
    if module._diff:
        result["diff"] = {"before": old, "after": new, "before_header": path,
                          "after_header": f"{path} (DCACHE settings)"}
    if new == old or module.check_mode:
        module.exit_json(**result)

    directory, base = os.path.split(path)
    fd, tmp = tempfile.mkstemp(dir=directory or ".", prefix=f".{base}.", suffix=".dcache")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(new.encode("utf-8", "surrogateescape"))
        st = os.stat(path)
        os.chmod(tmp, st.st_mode & 0o7777)
        os.chown(tmp, st.st_uid, st.st_gid)
        if module.params["validate"]:
            command = module.params["validate"]
            if "%s" not in command:
                module.fail_json(msg=f"validate must contain %s: {command}")
            rc, out, err = module.run_command([a.replace("%s", tmp) for a in shlex.split(command)])
            if rc != 0:
                # nothing was written: the real file is as it was
                module.fail_json(msg=f"{path} not changed: the candidate failed validation "
                                     f"({command.replace('%s', tmp)}, exit {rc}): "
                                     f"{err.strip() or out.strip() or 'no output'}",
                                 rc=rc, stdout=out, stderr=err, validation_failed=True,
                                 changed_settings=result["changed_settings"])
        if module.params["backup"]:
            result["backup_file"] = module.backup_local(path)
        module.atomic_move(tmp, path, unsafe_writes=False)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
