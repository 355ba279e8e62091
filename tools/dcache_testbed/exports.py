"""EXPORT blocks: the one place that writes them.

    dcache(2, "dcache", IO_Cache_Read="direct")   a DCACHE export over VFS
    vfs(1, "vfs")                                   a plain VFS export
    Export(...)                                     anything else, down to
                                                    malformed blocks

An export's path is relative to the server's filesystem unless absolute;
its pseudo path is "/" + its last component unless given.
"""

import os
from dataclasses import dataclass, field

# What every test export grants: the tests' client is root on loopback,
# over NFSv3 and v4 on TCP.
ACCESS = "Access_Type = RW; Squash = No_Root_Squash; Protocols = 3, 4; Transports = TCP; SecType = sys;"


@dataclass
class Export:
    """One EXPORT block.

    fsal        the FSAL it names: DCACHE, VFS, NULL, ...
    settings    the FSAL block's settings, written `Name = value;` in order
    sub_fsal    the nested FSAL a stacking FSAL names (None: no nested
                block at all; "": a nested block naming none)
    fsal_text, export_text, sub_text
                raw text in the FSAL, EXPORT and nested block (mistakes
                written as an operator would)
    """

    export_id: int
    path: str
    pseudo: str = ""
    fsal: str = "DCACHE"
    settings: dict = field(default_factory=dict)
    sub_fsal: str = "VFS"
    fsal_text: str = ""
    export_text: str = ""
    sub_text: str = ""
    access: str = ACCESS

    def __post_init__(self):
        if not self.pseudo:
            self.pseudo = "/" + os.path.basename(self.path.rstrip("/"))

    @property
    def name(self):
        """The pseudo path without its slash (a client's URL path)."""
        return self.pseudo.lstrip("/")

    def host_path(self, mnt):
        return self.path if os.path.isabs(self.path) else os.path.join(mnt, self.path)

    def stacks(self):
        return self.sub_fsal is not None and self.fsal not in ("VFS",)

    def with_settings(self, **settings):
        """The same export with settings added (or replaced)."""
        merged = dict(self.settings)
        merged.update(settings)
        return Export(**{**self.__dict__, "settings": merged})

    def block(self, mnt, backend=None):
        """The block's text; backend: IO_Backend for a DCACHE export that
        sets none (a suite run on the synchronous backend)."""
        settings = dict(self.settings)
        if backend and self.fsal == "DCACHE" and "IO_Backend" not in settings:
            settings["IO_Backend"] = backend
        inner = [f"Name = {self.fsal};"]
        inner += [f"{k} = {v};" for k, v in settings.items()]
        if self.fsal_text:
            inner.append(self.fsal_text)
        if self.stacks():
            named = f"Name = {self.sub_fsal}; " if self.sub_fsal else ""
            inner.append("FSAL { " + named + (self.sub_text + " " if self.sub_text else "") + "}")
        lines = [
            "EXPORT {",
            f'  Export_Id = {self.export_id}; Path = "{self.host_path(mnt)}"; Pseudo = {self.pseudo};',
            f"  {self.access}",
        ]
        if self.export_text:
            lines.append(f"  {self.export_text}")
        lines.append("  FSAL {")
        lines += [f"    {line}" for line in inner]
        lines += ["  }", "}"]
        return "\n".join(lines) + "\n"


def dcache(export_id, path, pseudo="", **settings):
    """A DCACHE export over VFS with these settings."""
    return Export(export_id, path, pseudo, settings=settings)


def vfs(export_id, path, pseudo=""):
    """A plain VFS export."""
    return Export(export_id, path, pseudo, fsal="VFS", sub_fsal=None)


def default_exports():
    """What a server serves unless told otherwise: /vfs (1) and /dcache (2)."""
    return [vfs(1, "vfs"), dcache(2, "dcache")]


# The cache modes as DCACHE exports of the modes tests (tests/e2e/modes/
# modes.hpp, k_exports: the same ids and names); each directory has the
# name of its pseudo path.
MODES = [
    ("buffered", {"IO_Cache_Read": "buffered", "IO_Cache_Write": "buffered"}),
    ("dontcache", {"IO_Cache_Read": "dontcache", "IO_Cache_Write": "dontcache"}),
    ("fadvise", {"IO_Cache_Read": "fadvise", "IO_Cache_Write": "fadvise"}),
    ("direct", {"IO_Cache_Read": "direct", "IO_Cache_Write": "direct"}),
    ("direct_data_sync", {"IO_Cache_Read": "direct", "IO_Cache_Write": "direct_data_sync"}),
    ("direct_file_sync", {"IO_Cache_Read": "direct", "IO_Cache_Write": "direct_file_sync"}),
    ("direct_cached_edges", {"IO_Cache_Read": "direct", "IO_Cache_Write": "direct",
                             "Direct_Misaligned_Dontcache": "false"}),
    ("direct_mem_buffered", {"IO_Cache_Read": "direct", "IO_Cache_Write": "direct",
                             "Direct_Misaligned_Memory": "buffered"}),
]


def mode_exports(first_id, prefix, count=len(MODES), base=None):
    """The first count modes of MODES as exports first_id, first_id + 1, ...
    named prefix + mode, in base (default: the server's filesystem)."""
    out = []
    for i, (mode, settings) in enumerate(MODES[:count]):
        name = prefix + mode
        out.append(dcache(first_id + i, os.path.join(base, name) if base else name, "/" + name, **settings))
    return out
