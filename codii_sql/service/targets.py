"""What a search request names, as shards: a folder, an index file, a server, a workspace's members."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from ..codebase import Codebase, is_remote
from ..errors import CodiiError, Remedy, UsageError
from ..ingest.report import Progress
from ..search.answer import Member, Note
from .codebases import find_codebase, index_file, is_index_file
from .indexes import OpenIndexes
from .portable import FileShard
from .remote import RemoteShard
from .shard_folder import ShardFolder
from .shards import LocalShard, Shard
from .workspaces import get_workspace, missing_member


@dataclass
class Targets:
    """The shards of one request, the members that are no shard (a folder that is gone, a codebase
    not indexed) with a note each, the workspace's name, and whether the answer merges several
    codebases (a workspace, or more than one path) or is one codebase's."""

    shards: list[Shard]
    members: list[Member] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    workspace: str | None = None
    many: bool = False


def resolve(paths: list[str], db: str | None, workspace: str | None, *, update: bool,
            indexes: OpenIndexes | None = None, progress: Progress | None = None,
            building: Callable[[Codebase], bool] | None = None, shards: str | None = None) -> Targets:
    """The shards of a request (see :class:`~.searching.SearchRequest` for the arguments).

    Raises:
        UsageError: an unknown or empty workspace, no member to search, a bad path, ``db`` with
            several codebases, or a shard folder without that shard (or without any).
    """
    if workspace is not None and not workspace.strip():  # `--workspace ''` searched the current folder, silently
        raise UsageError("is empty", "name a workspace (`codii-sql workspace list` names them)", field="workspace")
    if shards is not None:
        folder = ShardFolder(shards)
        if len(paths) == 1:
            return Targets([folder.shard(paths[0], indexes)])
        found = [folder.shard(p, indexes) for p in paths] if paths else folder.shards(indexes)
        if not found:
            raise UsageError(f"no index file in {folder.folder}", "put .db files there (`codii-sql export PATH --to "
                                                                  "FILE` writes one)")
        return Targets(found, workspace=folder.name, many=True)
    if not (workspace or len(paths) > 1):
        if paths and is_remote(paths[0]) and db is None:
            return Targets([RemoteShard(paths[0])])
        codebase, scope = find_codebase(paths[0] if paths else None, db)
        if codebase.alone:
            return Targets([FileShard(codebase, indexes=indexes)])
        return Targets([LocalShard(codebase, scope, update=update, progress=progress, indexes=indexes,
                                   building=building)])
    if db is not None:
        raise UsageError("an index file is one codebase's, and this search asks several",
                         "drop the workspace or the extra paths", field="db")
    name, found = member_paths(workspace, list(paths))
    codebases, members, notes, scopes = members_of([p for p in found if not is_remote(p)], name)
    shards: list[Shard] = [FileShard(cb, indexes=indexes) for cb in codebases if cb.alone]
    shards += [LocalShard(cb, scope, update=update, indexes=indexes, building=building)
               for cb in codebases if not cb.alone for scope in scopes.get(cb, [""])]
    shards += [RemoteShard(p) for p in found if is_remote(p)]
    if not shards:
        why = "; ".join(n.worded(lambda h: None) for n in notes) or "no codebase given"
        raise UsageError(f"nothing to search{f' in workspace {name!r}' if name else ''}: {why}")
    return Targets(shards, members, notes, name, True)


def member_paths(workspace: str | None, paths: list[str]) -> tuple[str | None, list[str]]:
    """The workspace's name (lower case) and its member paths followed by ``paths``, each once.

    Raises:
        UsageError: an unknown or empty workspace.
    """
    name, found = None, []
    if workspace:
        ws = get_workspace(workspace)
        name, found = ws.name, list(ws.paths)
    found += [p if is_remote(p) else os.path.abspath(os.path.expanduser(p)) for p in paths]
    return name, list(dict.fromkeys(found))


def members_of(paths: list[str], workspace: str | None = None
               ) -> tuple[list[Codebase], list[Member], list[Note], dict[Codebase, list[str]]]:
    """The indexed codebases among ``paths`` (an index file is its codebase, alone when its source is
    not here); a member and a note for each that is not; and the scopes: a subfolder of an indexed
    codebase searches that index, its files under the subfolder only (``{codebase: ["sub/folder"]}``),
    as a one-codebase search does. Several subfolders of one index are each searched (a new user's
    zod/packages/docs and zod/packages/zod had become the second alone); the codebase itself, or a
    folder holding another, takes the place of what it holds."""
    codebases, members, notes, found = [], [], [], {}
    for path in paths:
        try:
            cb = index_file(path) if is_index_file(path) else Codebase.open(path)
        except CodiiError as err:
            members.append(Member(path, "missing"))
            notes.append(missing_member(path, err, workspace))
            continue
        outer = None if cb.db_path.is_file() else cb.enclosing()
        scope = cb.root.relative_to(outer.root).as_posix() if outer is not None else ""
        cb = outer or cb
        found.setdefault(cb, set()).add(scope)
        if cb in codebases:  # two spellings of one folder, or two folders of one index
            continue
        if not cb.db_path.is_file():
            members.append(Member(str(cb.root), "not_indexed"))
            notes.append(Note("member", f"{cb.root} is not indexed", Remedy("build", {"root": str(cb.root)}),
                              str(cb.root)))
            continue
        codebases.append(cb)
    scopes = {cb: [""] if "" in subs else sorted(s for s in subs if not any(s.startswith(t + "/") for t in subs))
              for cb, subs in found.items()}
    for cb, subs in found.items():  # a member inside another is searched with it: said, not dropped unseen
        for inner in sorted(subs - set(scopes[cb])):
            holder = next(t for t in scopes[cb] if t == "" or inner.startswith(t + "/"))
            notes.append(Note("member", f"{cb.root / inner} lies inside the member {cb.root / holder}: searched as "
                                        "part of it", codebase=str(cb.root / inner)))
    return codebases, members, notes, scopes
