"""Lists and texts in an answer cut to a page: at most so many items or lines, and as many whole ones as fit in a token budget."""

from __future__ import annotations

from ..search.budget import CHARS_PER_TOKEN, json_tokens, page, tokens

#: At most this many characters per get_content answer (~25k tokens): 2,000 lines do not bound a
#: minified bundle's single 1 MB line, which would fill an agent's context.
MAX_CONTENT_CHARS = 100_000


def codebases_page(rows: list[dict], *, limit: int, offset: int = 0, max_tokens: int | None = None) -> dict:
    """``{"codebases": rows[offset:...], "total"}``: at most ``limit`` rows from the ``offset``-th
    (0-based) on, as many whole ones as fit in ``max_tokens`` (None: any; at :func:`_listed` each;
    at least one); a cut page adds ``truncated``,
    ``next_offset`` and a ``note`` saying where the rest starts."""
    shown = page(rows, offset, limit, max_tokens, _listed)
    out = {"codebases": shown, "total": len(rows)}
    if offset + len(shown) < len(rows):
        cut = f"limit={limit}" if len(shown) == limit else f"max_tokens={max_tokens}"
        out.update(truncated=True, next_offset=offset + len(shown),
                   note=f"{len(shown)} of {len(rows)} codebases from offset {offset} (to fit {cut}): the rest from "
                        f"offset={offset + len(shown)}")
    return out


def fit_file_lists(status: dict, max_tokens: int) -> dict:
    """``status`` (an indexing status) with its ``skipped_files`` and then ``failed_files`` cut to the whole
    entries that fit in ``max_tokens`` with the status's other fields and the note this adds (they took ~300
    tokens beside lists fitted to the whole budget: 304 at 100, a new user's), at least one entry; the paths left
    out are counted in ``skipped_files["more"]`` and ``failed_more``, and a ``note`` says so."""
    files = (status.get("skipped_files") or {}).get("files") or []
    failed = list((status.get("failed_files") or {}).items())
    shown = len(files) + len(failed)
    out = status
    while shown > 1 and json_tokens(out) > max_tokens:
        shown = shown * 3 // 4 if json_tokens(out) > 2 * max_tokens else shown - 1
        out = _lists_cut(status, files[:shown], failed[:max(shown - len(files), 0)], max_tokens)
    return out


def _lists_cut(status: dict, kept: list[dict], kept_failed: list[tuple], max_tokens: int) -> dict:
    """``status`` showing ``kept`` of its skipped paths and ``kept_failed`` of its failed ones, the rest counted."""
    skipped = status.get("skipped_files") or {}
    cut = len(skipped.get("files") or []) - len(kept), len(status.get("failed_files") or {}) - len(kept_failed)
    by_reason = dict(skipped.get("more_by_reason") or {})
    for f in (skipped.get("files") or [])[len(kept):]:
        by_reason[f["reason"]] = by_reason.get(f["reason"], 0) + 1
    out = {**status, "skipped_files": {**skipped, "files": kept, "more": skipped.get("more", 0) + cut[0],
                                       "more_by_reason": by_reason},
           "failed_files": dict(kept_failed)}
    if cut[1]:
        out["failed_more"] = cut[1]
    said = f"{cut[0]} skipped and {cut[1]} failed paths left out to fit max_tokens={max_tokens}: " \
           "`codii-sql status --skipped` lists them"
    out["note"] = "; ".join(filter(None, (status.get("note"), said)))
    return out


def fit_workspaces(rows: list[dict], max_tokens: int) -> dict:
    """``{"workspaces": rows}`` with their members, in order, while they fit in ``max_tokens``
    together (at :func:`_listed` each) (a workspace reached with budget left keeps at least one); a workspace
    cut short has ``more_members`` (how many were left out), and ``truncated`` and a ``note`` say so
    (searching a workspace by name still covers every member); the workspaces past the budget are left
    out whole and counted in ``more_workspaces`` (28 workspaces were listed at max_tokens=100, members cut)."""
    left, out, cut = max_tokens, [], 0
    for ws in rows:
        if left <= 0 and out:
            return {"workspaces": out, "more_workspaces": len(rows) - len(out), "truncated": True,
                    "note": f"{len(rows) - len(out)} workspaces and {cut + sum(len(w['members']) for w in rows[len(out):])} "
                            f"members left out to fit max_tokens={max_tokens}: list_workspaces with a larger max_tokens "
                            "lists them; search_code with a workspace's name searches every member"}
        members = ws["members"]
        kept = page(members, 0, len(members), left, _listed) if left > 0 else []
        left -= sum(map(_listed, kept)) + json_tokens({k: v for k, v in ws.items() if k != "members"})
        cut += len(members) - len(kept)
        out.append({**ws, "members": kept} if len(kept) == len(members) else
                   {**ws, "members": kept, "more_members": len(members) - len(kept)})
    if not cut:
        return {"workspaces": rows}
    return {"workspaces": out, "truncated": True,
            "note": f"{cut} members left out to fit max_tokens={max_tokens} (more_members says where): search_code "
                    "with the workspace's name searches them all, get_indexing_status with a member's path reports it"}


def _listed(row: dict) -> int:
    """A codebase's tokens in a list: its JSON, and its path again (a face's summary names each one)."""
    return json_tokens(row, plus=str(row.get("root") or row.get("codebase") or row.get("db") or ""))


#: Tokens of a line's number as the MCP text shows it (7 characters, :func:`tokens`' 4 a token).
NUMBER_TOKENS = 2


def lines_within_tokens(lines: list[str], start: int, end: int, max_tokens: int | None = None) -> tuple[int, str, bool]:
    """Lines ``start``..``end`` (1-based, inclusive) within ``max_tokens`` (:func:`tokens`; by default, and
    at most, those of :data:`MAX_CONTENT_CHARS` characters): as many whole lines as fit, or the head of
    line ``start`` when it alone is longer (then ``cut``). Each line counts its number too (``cat -n``'s
    ``%6d\t``, :data:`NUMBER_TOKENS`), as an agent reads it: a new user's 8,000-token page of a file of
    short lines was 9,083 tokens so. Returns ``(last line given, text, cut)``."""
    cap = min(max_tokens or MAX_CONTENT_CHARS // CHARS_PER_TOKEN, MAX_CONTENT_CHARS // CHARS_PER_TOKEN)
    size = 0
    for n in range(start, end + 1):
        size += tokens(lines[n - 1]) + NUMBER_TOKENS
        if size > cap:
            if n == start:
                return n, head_within(lines[n - 1], cap), True
            return n - 1, "".join(lines[start - 1:n - 1]), False
    return end, "".join(lines[start - 1:end]), False


def head_within(line: str, cap: int) -> str:
    """The longest start of ``line`` within ``cap`` tokens (a few cuts: each guesses from the last count)."""
    k = min(len(line), cap * CHARS_PER_TOKEN)
    while k > 0 and (used := tokens(line[:k])) > cap:
        k = min(k - 1, k * cap // used)
    return line[:k]
