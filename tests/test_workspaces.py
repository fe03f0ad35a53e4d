"""Workspaces: WORKSPACE_<NAME> and the registry, building and searching several real indexes, the merge."""

from __future__ import annotations

import json
import math
import os
import subprocess

import pytest
from click.testing import CliRunner
from support.trees import SAMPLE, SHOP, write_tree

from codii_sql import service
from codii_sql.cli import cli
from codii_sql.codebase import Codebase
from codii_sql.errors import UsageError
from codii_sql.search.merge import MemberAnswer, merge
from codii_sql.search.results import Result, SearchOptions
from codii_sql.service.workspaces import parse_paths, workspaces


def run(*args, env=None):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False, env=env)


def ask(query, opts, roots, **kw):
    """The service's answer over the codebases at ``roots``, from their last committed states."""
    return service.search(service.SearchRequest(query, opts, [str(r) for r in roots], update=False, **kw))


@pytest.fixture
def two(tmp_path):
    """The sample repository and the shop, both built with the real model."""
    http, shop = write_tree(tmp_path / "http", SAMPLE), write_tree(tmp_path / "shop", SHOP)
    assert run("build", http, shop).exit_code == 0
    return http.resolve(), shop.resolve()


def test_env_values_parse_as_directory_indexer_reads_them(monkeypatch, tmp_path):
    assert parse_paths('["/a", " /b ", ""]') == ["/a", "/b"]
    assert parse_paths("/a, /b,,") == ["/a", "/b"]
    assert parse_paths("/only") == ["/only"]
    for bad in ('{"not": "a list"}', '["/a",', "[1, null]"):  # JSON-looking: never split on commas
        with pytest.raises(ValueError):
            parse_paths(bad)
    monkeypatch.setenv("WORKSPACE_BROKEN", '["/a",')
    with pytest.raises(UsageError, match="WORKSPACE_BROKEN is not valid JSON"):
        service.get_workspace("broken")
    assert service.describe(workspaces()["broken"])["note"].startswith("WORKSPACE_BROKEN")
    monkeypatch.delenv("WORKSPACE_BROKEN")
    monkeypatch.setenv("WORKSPACE_Frontend", json.dumps([str(tmp_path / "web"), str(tmp_path / "app")]))
    monkeypatch.setenv("workspace_backend", f"{tmp_path}/api,{tmp_path}/db")
    found = workspaces()
    assert set(found) == {"frontend", "backend"}
    assert found["frontend"].paths == (str(tmp_path / "web"), str(tmp_path / "app"))
    assert found["backend"].source == "env" and len(found["backend"].paths) == 2
    assert service.get_workspace("FRONTEND").name == "frontend"


def test_a_file_is_no_member_and_removing_a_stranger_removes_nothing(tmp_path, codii_home):
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(UsageError, match="is a file"):
        service.add_paths("w", [str(tmp_path / "f.txt")])
    service.add_paths("w", [str(tmp_path / "later")])  # not there yet: kept, noted when searched
    with pytest.raises(UsageError, match="not a member"):
        service.remove("w", [str(tmp_path / "other")])
    assert service.get_workspace("w").paths == (str(tmp_path / "later"),)


def test_an_index_file_is_a_member_added_listed_and_searched_as_its_codebase(tmp_path, codii_home):
    """A search read an exported .db given by WORKSPACE_<NAME>, but `workspace add` refused it ("is a file") and
    `workspace list` called it missing ("pass the folder that contains it"). It is read alone: a workspace build
    skips it, and a .db that is no index is refused."""
    shop = write_tree(tmp_path / "shop", SHOP)
    http = write_tree(tmp_path / "http", SAMPLE)
    assert run("build", shop, http, "--no-vectors").exit_code == 0
    exported = tmp_path / "shop.db"
    assert run("export", shop, "--to", exported).exit_code == 0, "export failed"
    res = run("workspace", "add", "both", exported, http)
    assert res.exit_code == 0 and "Warning" not in res.output, res.output
    listed = json.loads(run("workspace", "list", "--json").output)["workspaces"][0]["members"]
    assert [(m["codebase"], m["status"]) for m in listed] == [(str(exported), "indexed"), (str(http), "indexed")]
    found = ask("checkout cart total", SearchOptions(limit=3, mode="bm25"), [], workspace="both")
    assert (found.results[0].codebase, found.results[0].path) == (str(exported), "cart/checkout.js"), found.results
    built = run("build", "--workspace", "both", "--no-vectors")  # helper 62: the export failed every such build
    assert built.exit_code == 0 and "1 of 2 codebases built" in built.output, built.output
    assert f"skipped (index files read alone): {exported}" in built.output, built.output
    (tmp_path / "fake.db").write_text("not an index")  # helper 62: any *.db was added
    refused = run("workspace", "add", "both", tmp_path / "fake.db")
    assert refused.exit_code != 0 and "fake.db is damaged or not a SQLite database" in refused.output, refused.output


def test_a_damaged_member_fails_alone_in_status_and_each_folder_is_listed_once(two, codii_home):
    http, shop = two
    db = service.open_codebase(shop).db_path
    with db.open("r+b") as fh:
        fh.write(b"\x00" * 4096)  # the header page: SQLite no longer recognises the file
    described = service.describe(service.Workspace("w", (str(http), str(shop), str(http) + "/"), "env"))
    assert [(m["codebase"], m["status"]) for m in described["members"]] == [(str(http), "indexed"),
                                                                            (str(shop), "damaged")]
    assert "damaged" in described["members"][1]["note"] and "replaces" in described["members"][1]["note"]


def test_a_registry_that_cannot_be_written_is_one_line(monkeypatch, tmp_path):
    """A read-only CODII_SQL_HOME gave workspace add/remove a traceback (OSError on the lock file);
    a home below a file fails the same way, also for root, whom permissions do not stop. The CLI says
    so before any command, the registry's writer when called as a library."""
    from codii_sql.errors import StorageError

    (tmp_path / "file").write_text("")
    monkeypatch.setenv("CODII_SQL_HOME", str(tmp_path / "file" / "home"))
    for args in (["workspace", "add", "ro", tmp_path], ["workspace", "remove", "ro"]):
        res = CliRunner().invoke(cli, [str(a) for a in args])
        assert res.exit_code == 2 and "Traceback" not in res.output and res.output.count("\n") == 1, res.output
        assert "a file, not a folder" in res.output and "CODII_SQL_HOME" in res.output
    for call in (lambda: service.add_paths("ro", [str(tmp_path)]), lambda: service.remove("ro")):
        with pytest.raises(StorageError) as raised:
            call()
        assert "cannot write the workspace registry" in str(raised.value) and "CODII_SQL_HOME" in str(raised.value.hint)


def test_registry_add_remove_list_and_the_environment_wins(monkeypatch, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    added = json.loads(run("workspace", "add", "Team", a, b, a, "--json").output)
    assert added == {"name": "team", "paths": [str(a), str(b)], "source": "registry"}
    listed = json.loads(run("workspace", "list", "--json").output)["workspaces"]
    assert [(w["name"], w["source"], [m["status"] for m in w["members"]]) for w in listed] == \
        [("team", "registry", ["not_indexed", "not_indexed"])]
    monkeypatch.setenv("WORKSPACE_TEAM", str(b))
    text = run("workspace", "list").output
    assert "team (env): 1 member(s)" in text and str(a) not in text
    monkeypatch.delenv("WORKSPACE_TEAM")
    assert json.loads(run("workspace", "remove", "team", a, "--json").output)["paths"] == [str(b)]
    assert "workspace team removed" in run("workspace", "remove", "team").output
    gone = run("workspace", "remove", "team")
    assert gone.exit_code == 2 and "the registry has no workspace 'team'" in gone.output
    bad = run("workspace", "add", "no spaces", a)
    assert bad.exit_code == 2 and "letters, digits" in bad.output and "Traceback" not in bad.output


def test_a_damaged_registry_is_one_line_and_not_overwritten(tmp_path, codii_home):
    (codii_home / "workspaces.json").write_text("{not json")
    res = run("workspace", "list")
    assert res.exit_code == 2 and "workspaces.json cannot be read" in res.output and "fix or delete it" in res.output
    assert run("workspace", "add", "x", tmp_path).exit_code == 2
    assert (codii_home / "workspaces.json").read_text() == "{not json"


def test_build_several_and_search_one_list_that_names_each_codebase(two):
    http, shop = two
    out = json.loads(run("search", "compute the order total with tax", "--path", http, "--path", shop,
                         "--json").output)
    assert {m["codebase"]: m["status"] for m in out["codebases"]} == {str(http): "searched", str(shop): "searched"}
    top = out["results"][0]
    assert (top["codebase"], top["path"], top["symbol"]) == (str(shop), "cart/checkout.js", "checkoutTotal")
    assert {r["codebase"] for r in out["results"]} == {str(http), str(shop)}
    retry = json.loads(run("search", "retry with exponential backoff", "--path", http, "--path", shop,
                           "--json").output)["results"][0]
    assert (retry["codebase"], retry["symbol"]) == (str(http), "retry_with_backoff")


def test_each_members_own_order_survives_the_merge(two):
    """Acc@k cannot drop for a member whose results keep their own order: check it on real indexes."""
    http, shop = two
    opts = SearchOptions(limit=10)
    for query in ("follow redirects", "parse a header line", "reserve stock for an order", "debounce", "Session"):
        merged = ask(query, opts, [http, shop])
        for root in (http, shop):
            own = ask(query, opts, [root]).results
            mine = [(r.path, r.start_line) for r in merged.results if r.codebase == str(root)]
            assert mine == [(r.path, r.start_line) for r in own][:len(mine)], (query, root)


def test_a_gone_member_of_a_workspace_variable_is_dropped_from_that_variable(two, tmp_path, monkeypatch):
    """A new user's WORKSPACE_MIX member was gone; the note said `codii-sql workspace remove mix ...`,
    which refuses a workspace of a variable."""
    http, _ = two
    monkeypatch.setenv("WORKSPACE_MIX", f"{http},{tmp_path / 'gone'}")
    out = run("search", "checkoutTotal", "--workspace", "mix")
    assert out.exit_code == 0 and "drop it from WORKSPACE_MIX" in out.output and "workspace remove" not in out.output, \
        out.output
    assert run("workspace", "add", "reg", http, tmp_path / "gone").exit_code == 0
    assert "`codii-sql workspace remove reg " in run("search", "checkoutTotal", "--workspace", "reg").output
    # the listing (MCP list_workspaces) names the variable too, not a WORKSPACE_<NAME> to fill in
    gone = next(m for m in service.describe(service.get_workspace("mix"))["members"] if m["status"] == "missing")
    assert "WORKSPACE_MIX" in gone["note"] and "<NAME>" not in gone["note"], gone


def test_workspace_search_notes_missing_and_unindexed_members_and_answers(two, tmp_path):
    http, shop = two
    never = write_tree(tmp_path / "never", {"x.py": "def x():\n    return 1\n"})
    assert run("workspace", "add", "mix", http, shop, never, tmp_path / "gone").exit_code == 0
    out = json.loads(run("search", "checkoutTotal", "--workspace", "MIX", "--json").output)
    assert out["workspace"] == "mix"
    status = {m["codebase"]: m["status"] for m in out["codebases"]}
    assert status == {str(http): "searched", str(shop): "searched", str(never.resolve()): "not_indexed",
                      str(tmp_path / "gone"): "missing"}
    assert out["results"][0]["symbol"] == "checkoutTotal"
    assert "is not indexed" in out["note"] and "the folder is gone" in out["note"]
    text = run("search", "checkoutTotal", "--workspace", "mix").output
    assert f"{shop}/cart/checkout.js:1-" in text and "Note:" in text
    described = service.describe(service.get_workspace("mix"))
    assert [m["status"] for m in described["members"]] == ["indexed", "indexed", "not_indexed", "missing"]
    assert described["members"][0]["chunks"] > 0 and described["members"][0]["size_bytes"] > 0
    # BM25 alone merges by rank (no cosine to weigh members by), and that is not a model mix-up.
    bm25 = json.loads(run("search", "checkoutTotal", "--workspace", "mix", "--mode", "bm25", "--json").output)
    assert bm25["results"] and "different embedding models" not in bm25.get("note", "")


def test_a_workspace_whose_every_member_failed_is_an_error_not_no_good_match(two, codii_home, monkeypatch):
    """A new user's workspace of one damaged index answered `no_good_match: true`, exit 0 (HTTP 200, MCP no
    error): an agent reads that as "not in this codebase" of a codebase nobody read."""
    http, shop = two
    with service.open_codebase(shop).db_path.open("r+b") as fh:
        fh.write(b"\x00" * 4096)
    env = {**os.environ, "WORKSPACE_ONLY": str(shop), "WORKSPACE_BOTH": f"{http},{shop}"}
    with service.open_codebase(http).db_path.open("r+b") as fh:  # a second member failing: both are named
        header = fh.read(4096)
        fh.seek(0)
        fh.write(b"\x00" * 4096)
    two_down = subprocess.run(["codii-sql", "search", "order total", "--workspace", "both", "--json"], env=env,
                              capture_output=True, text=True, timeout=300, check=False)
    said = json.loads(two_down.stdout)["error"]
    assert two_down.returncode == 1 and said.startswith("none of the 2 codebases") and str(http) in said \
        and str(shop) in said, said
    with service.open_codebase(http).db_path.open("r+b") as fh:
        fh.write(header)
    done = subprocess.run(["codii-sql", "search", "order total", "--workspace", "only", "--json"], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    refused = json.loads(done.stdout)
    assert done.returncode == refused["exit_code"] == 1 and "Traceback" not in done.stderr, done
    assert refused["error"].startswith(f"none of the 1 codebases of workspace only could be searched; {shop}: ")
    assert refused["hint"] == f"`codii-sql build {shop} --force` rebuilds it"  # the member, not the current folder
    both = subprocess.run(["codii-sql", "search", "retry the request", "--workspace", "both", "--json"], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert both.returncode == 0, both.stderr
    states = {m["codebase"]: m["status"] for m in json.loads(both.stdout)["codebases"]}
    assert states == {str(http): "searched", str(shop): "failed"}


def test_unknown_empty_and_all_missing_workspaces_are_one_line(monkeypatch, tmp_path):
    res = run("search", "anything", "--workspace", "nope")
    assert res.exit_code == 2 and "no workspace 'nope'" in res.output and "workspace add nope" in res.output
    res = run("search", "anything", "--workspace", "")  # it searched the current folder, silently
    assert res.exit_code == 2 and "--workspace is empty" in res.output
    monkeypatch.setenv("WORKSPACE_EMPTY", " , ")
    assert "workspace 'empty' has no members: set WORKSPACE_EMPTY to PATH,PATH" in \
        run("search", "x", "--workspace", "empty").output
    monkeypatch.setenv("WORKSPACE_LOST", str(tmp_path / "nowhere"))
    res = run("search", "x", "--workspace", "lost")
    assert res.exit_code == 2 and "nothing to search in workspace 'lost'" in res.output
    assert "Traceback" not in res.output


def test_build_workspace_builds_the_others_when_one_member_is_gone(tmp_path):
    a = write_tree(tmp_path / "a", {"a.py": "def alpha():\n    return 1\n"})
    b = write_tree(tmp_path / "b", {"b.js": "function beta() { return 2; }\n"})
    run("workspace", "add", "w", a, b, tmp_path / "gone")
    res = run("build", "--workspace", "w")
    assert res.exit_code == 1
    assert "2 of 3 codebases built: 2 files, 2 chunks" in res.output and f"failed: {tmp_path / 'gone'}" in res.output
    st = json.loads(run("status", "--workspace", "w", "--json").output)
    assert [m["status"] for m in st["members"]] == ["indexed", "indexed", "missing"]
    listed = run("list").output
    assert "[workspace w]" in listed and str(a) in listed


def test_members_of_different_models_merge_by_rank_with_a_note(tmp_path):
    http = write_tree(tmp_path / "http", SAMPLE)
    shop = write_tree(tmp_path / "shop", SHOP)
    assert run("build", http).exit_code == 0
    assert run("build", shop, "--embedder", "local:fast").exit_code == 0
    out = json.loads(run("search", "order total with tax", "--path", http, "--path", shop, "--json").output)
    assert "merged by rank" in out["note"]
    # By rank, each member's first answer is in the first two, whichever model made it.
    assert "checkoutTotal" in {r["symbol"] for r in out["results"][:2]}
    assert {r["codebase"] for r in out["results"][:2]} == {str(http.resolve()), str(shop.resolve())}


def _result(path: str, score: float, match: float | None, tier: int = 0) -> Result:
    return Result(path, 1, 2, score, "python", "function", None, "", False, 1, "source", tier=tier, knn_match=match)


def test_merge_weighs_members_by_how_well_each_matches_and_keeps_named_tiers_first():
    near = MemberAnswer("/near", [_result("n1.py", 1.0, 0.60), _result("n2.py", 0.5, 0.60)], "m")
    far = MemberAnswer("/far", [_result("f1.py", 1.0, 0.45), _result("f2.py", 0.9, 0.45, tier=1)], "m")
    out = merge([far, near], 10)
    merged, by_rank = out.results, out.by_rank
    assert not by_rank and out.top == 0.60 and out.floor == -math.inf  # room left: anything enters
    assert [r.path for r in merged] == ["f2.py", "n1.py", "n2.py", "f1.py"]
    assert [r.codebase for r in merged] == ["/far", "/near", "/near", "/far"]
    assert merge([far, near], 2).floor == 1.0  # the last kept: n1.py at weight 1
    # Both members equally close: fused scores decide, members interleave.
    even = merge([MemberAnswer("/a", [_result("a.py", 0.6, 0.5)], "m"),
                  MemberAnswer("/b", [_result("b.py", 0.9, 0.5)], "m")], 10).results
    assert [r.path for r in even] == ["b.py", "a.py"]
    # A little behind (a third of T): still above the other's weaker results.
    close = merge([MemberAnswer("/a", [_result("a1.py", 1.0, 0.50), _result("a2.py", 0.3, 0.50)], "m"),
                   MemberAnswer("/b", [_result("b1.py", 1.0, 0.49)], "m")], 10).results
    assert [r.path for r in close] == ["a1.py", "b1.py", "a2.py"]
    # A member's own order holds: a symbol's windows read top-down though the first scores lowest (a new
    # user's workspace answer put tokio's spawn_blocking signature window after its body's, unlike the folder's).
    windows = MemberAnswer("/t", [_result("doc.rs", 0.34, 0.5), _result("sig.rs", 1.46, 0.5),
                                  _result("other.rs", 1.30, 0.5)], "m")
    kept = merge([windows, MemberAnswer("/u", [_result("u.py", 1.40, 0.5)], "m")], 10).results
    assert [r.path for r in kept] == ["doc.rs", "sig.rs", "u.py", "other.rs"]
    mixed = merge([MemberAnswer("/a", [_result("a1.py", 1, 0.9), _result("a2.py", 1, 0.8)], "m1"),
                   MemberAnswer("/b", [_result("b1.py", 1, 0.1)], "m2")], 2)
    assert mixed.by_rank and [r.path for r in mixed.results] == ["a1.py", "b1.py"]
    bm25 = merge([MemberAnswer("/a", [_result("a1.py", 1, None)], "m"),
                  MemberAnswer("/b", [_result("b1.py", 2, None)], "m")], 2)
    assert bm25.by_rank and [r.path for r in bm25.results] == ["a1.py", "b1.py"]


def test_a_member_without_vectors_keeps_its_place_only_with_bm25_evidence():
    """A shard exported without vectors has no cosine: its best chunk, whatever it was, scored
    like the best match of the member that has vectors (a new user's 'command line options' over
    a folder of shards listed two graph benchmarks above the answer)."""
    near = MemberAnswer("/near", [_result("n1.py", 1.0, 0.60), _result("n2.py", 0.8, 0.60),
                                  _result("n3.py", 0.5, 0.60)], "m")
    blind = [_result("b1.py", 1.0, None), _result("b2.py", 0.9, None)]
    weak = merge([near, MemberAnswer("/blind", blind, "m", evidence=False)], 3).results
    assert [r.path for r in weak] == ["n1.py", "n2.py", "n3.py"]  # 1.0 * e^-1 = 0.37 < 0.5
    held = merge([near, MemberAnswer("/blind", blind, "m", evidence=True)], 3).results
    assert [r.path for r in held] == ["n1.py", "b1.py", "b2.py"]  # every word found: as it scores
    unjudged = merge([near, MemberAnswer("/blind", blind, "m")], 3).results  # a long query, a server
    assert [r.path for r in unjudged] == [r.path for r in held]
    # A new user's `Pass.Reportf` over Django (no vectors) and x/tools: a Django .po holding "report" came
    # second, above x/tools' other Reportf: a BM25-only member's scores run on another scale than 0.37 fixes.
    tools = MemberAnswer("/tools", [_result("analysis.go", 1.549, 0.49), _result("bug.go", 0.137, 0.49),
                                    _result("pass.go", 0.032, 0.49)], "m")
    django = MemberAnswer("/django", [_result("django.po", 0.516, None), _result("module.py", 0.032, None)], "m",
                          evidence=False)
    assert [r.path for r in merge([django, tools], 4).results] == ["analysis.go", "bug.go", "pass.go", "django.po"]
    assert [r.path for r in merge([django, tools], 5).results][-1] == "module.py"  # still there, after
    tools_bm25 = MemberAnswer("/tools", [_result("analysis.go", 1.5, None), _result("bug.go", 0.1, None)], "m",
                              evidence=True)
    assert [r.path for r in merge([django, tools_bm25], 3).results] == ["analysis.go", "bug.go", "django.po"]


def test_an_option_no_member_can_take_is_refused_once_and_one_some_can_take_is_noted(two):
    http, shop = two
    with pytest.raises(UsageError, match="unknown mode"):
        ask("x", SearchOptions(mode="sideways"), [http, shop])
    out = ask("reserve stock", SearchOptions(language="go"), [http, shop])
    assert {r.codebase for r in out.results} == {str(shop)}
    http_row = next(m for m in out.members if m.codebase == str(http))
    assert http_row.status == "searched" and http_row.results == 0
    assert any(n.codebase == str(http) and "no 'go' code in this index" in n.what for n in out.notes)
    with pytest.raises(UsageError, match="no 'klingon' code in any of the 2 codebases"):
        ask("x", SearchOptions(language="klingon"), [http, shop])


#: A third codebase, far from the other two (Rust, gardening).
GARDEN = {"garden/water.rs": '''
    /// Water each plant in the bed when the soil moisture drops below its threshold.
    pub fn water_plants(bed: &mut Vec<Plant>, moisture: f32) -> usize {
        let mut watered = 0;
        for plant in bed.iter_mut() {
            if moisture < plant.threshold { plant.water(); watered += 1; }
        }
        watered
    }
    '''}


@pytest.fixture
def three(two, tmp_path):
    garden = write_tree(tmp_path / "garden", GARDEN)
    assert run("build", garden).exit_code == 0
    return [service.open_codebase(p) for p in (*two, garden.resolve())]


def test_members_far_below_the_best_match_are_left_out_unless_the_near_ones_fall_short(three):
    http, shop, garden = three
    query = "compute the order total with tax and apply a discount"
    roots = [cb.root for cb in three]
    out = ask(query, SearchOptions(limit=2), roots)
    rows = {m.codebase: m for m in out.members}
    assert rows[str(shop.root)].results == 2 and rows[str(shop.root)].status == "searched"
    assert rows[str(http.root)].status == rows[str(garden.root)].status == "pruned"
    assert [r.codebase for r in out.results] == [str(shop.root)] * 2
    told = [n for n in out.notes if n.kind == "pruned"]
    assert {n.codebase for n in told} == {str(http.root), str(garden.root)}
    assert all(n.hint.kind == "search_member" for n in told)
    # Left out only because their best could not enter: asking everyone gives the same list.
    everyone = ask(query, SearchOptions(limit=2, exts=[".py", ".js", ".md", ".go", ".rs"]), roots)  # no routing
    assert [(r.codebase, r.id) for r in everyone.results] == [(r.codebase, r.id) for r in out.results]
    wide = ask(query, SearchOptions(limit=10), roots)  # the shop alone has too few
    assert not any(m.status == "pruned" for m in wide.members)
    assert {r.codebase for r in wide.results} == {str(cb.root) for cb in three}
    named = ask("checkoutTotal", SearchOptions(limit=1), roots)  # a name: everyone
    assert not any(m.status == "pruned" for m in named.members)
    # a place: everyone, the member holding it too, though the words are the shop's
    placed = ask("compute the order total with tax, as garden/water.rs:5 does", SearchOptions(limit=2), roots)
    assert not any(m.status == "pruned" for m in placed.members)
    assert placed.results[0].codebase == str(garden.root) and placed.results[0].symbol == "water_plants", \
        [(r.codebase, r.symbol) for r in placed.results]


def test_a_member_searched_whose_results_all_rank_below_the_limit_is_said_to_have_had_some(two):
    """A helper's workspace gave every place to cobra; commander, searched, had results and no word said so."""
    http, shop = two
    query = "compute the order total with tax and apply a discount"
    out = ask(query, SearchOptions(limit=1, exts=[".py", ".js", ".md"]), [http, shop])  # an ext: no routing
    rows = {m.codebase: m for m in out.members}
    assert rows[str(http)].status == "searched" and rows[str(http)].results == 0
    assert [r.codebase for r in out.results] == [str(shop)]
    told = [n for n in out.notes if n.kind == "outranked"]
    assert [n.codebase for n in told] == [str(http)] and told[0].hint.kind == "search_member", out.notes
    assert "none among these 1" in told[0].what and " against " in told[0].what
    wide = ask(query, SearchOptions(limit=10, exts=[".py", ".js", ".md"]), [http, shop])
    assert not [n for n in wide.notes if n.kind == "outranked"]
    cli = json.loads(run("search", query, "--path", http, "--path", shop, "--limit", 1, "--ext", ".py",
                         "--ext", ".js", "--json").output)
    assert cli["notes"] == ["outranked"] and f"{http} had results, none among these 1" in cli["note"]
    assert f"search it alone with --path {http}" in cli["note"], cli["note"]


def test_members_notes_never_take_a_workspace_answer_past_its_budget(tmp_path, codii_home):
    """A new user's workspace of two members built without vectors answered 476 tokens at --max-tokens 400: each
    member's long "vectors off" note came out of the budget, and the first result stays whatever is left."""
    roots = [write_tree(tmp_path / name, {f"{name}_{i}.py": "".join(
        f"def parse_flag_{name}_{i}_{j}(value):\n    \"\"\"Parse one flag value of {name}.\"\"\"\n"
        f"    return value.split(',')  # flag value parsing, part {j}\n\n\n" for j in range(6)) for i in range(4)})
             for name in ("alpha", "beta")]
    assert run("build", *roots, "--no-vectors").exit_code == 0
    args = ["search", "flag value parsing"] + [a for r in roots for a in ("--path", r)]
    out = json.loads(run(*args, "--max-tokens", 400, "--json").output)
    assert out["results"] and out["budget"]["used_tokens"] <= 400, out["budget"]
    assert len(json.dumps(out)) / 4 <= 400, len(json.dumps(out))
    assert out["notes"].count("vectors") == 1 and "built with vectors off" in out["note"], out["note"]
    roomy = json.loads(run(*args, "--max-tokens", 4000, "--json").output)  # with room, each note says why too
    assert "rank by BM25 alone" in roomy["note"], roomy["note"]


def test_the_cheap_match_probe_agrees_with_the_searchs_own(three):
    opts = SearchOptions(limit=5)
    for cb in three:
        searcher = service.open_searcher(cb)
        try:
            for query in ("retry with exponential backoff", "water the plants when the soil is dry"):
                probe = searcher.match(searcher.embedder.embed_query(query))
                assert probe == pytest.approx(searcher.search(query, opts)[0].knn_match, abs=1e-6)
        finally:
            searcher.store.close()


def test_a_member_still_waiting_for_vectors_is_neither_left_out_nor_pushed_down(three):
    http, shop, garden = three
    (shop.root / "cart" / "refund.js").write_text(
        "// Refund a returned order: credit the card and restock the items.\n"
        "export function refundReturnedOrder(order, card) {\n  card.credit(order.total);\n"
        "  order.items.forEach(item => item.restock());\n}\n")
    service.build(shop, vectors=False)  # its new chunks wait for vectors; the old ones have theirs
    searcher = service.open_searcher(shop)
    try:
        assert searcher.match(searcher.embedder.embed_query("refund")) is None
    finally:
        searcher.store.close()
    out = ask("refund a returned order and restock", SearchOptions(limit=2), [http.root, garden.root, shop.root])
    rows = {m.codebase: m for m in out.members}
    assert rows[str(shop.root)].status == "searched"
    assert (str(shop.root), "cart/refund.js") in [(r.codebase, r.path) for r in out.results]


def test_a_subfolder_among_several_paths_searches_its_enclosing_index_under_it(two):
    http, shop = two
    out = ask("retry with exponential backoff", SearchOptions(limit=10), [http / "web", shop])
    rows = {m.codebase: m for m in out.members}
    assert rows[str(http)].status == "searched" and rows[str(http)].scope == "web"
    assert any(n.codebase == str(http) and "files under web/ only" in n.what for n in out.notes)
    mine = [r.path for r in out.results if r.codebase == str(http)]
    assert mine and all(p.startswith("web/") for p in mine)


def test_two_subfolders_of_one_index_are_both_searched_and_the_whole_wins(two):
    """A new user's workspace of zod/packages/docs and zod/packages/zod searched packages/zod alone, and
    zod with zod/packages/zod was cut down to the subfolder."""
    http, shop = two
    out = ask("retry with exponential backoff and parse headers", SearchOptions(limit=10), [http / "web", http / "app"])
    scopes = sorted(m.scope for m in out.members if m.codebase == str(http) and m.status == "searched")
    assert scopes == ["app", "web"], out.members
    folders = {r.path.split("/")[0] for r in out.results if r.codebase == str(http)}
    assert folders == {"app", "web"}, [r.path for r in out.results]
    whole = ask("retry with exponential backoff", SearchOptions(limit=10), [http, http / "web"])
    assert [m.scope for m in whole.members if m.codebase == str(http)] in ([""], [None]), whole.members
    assert any(not r.path.startswith("web/") for r in whole.results if r.codebase == str(http))


def test_a_member_inside_another_is_said_to_be_searched_with_it(two, codii_home):
    """A new user's workspace of a repository and its src/ listed the src/ member nowhere in the answer:
    it is searched as part of the repository, and a note now says so."""
    http, _ = two
    res = run("search", "retry", "--path", http, "--path", http / "app", "--mode", "bm25", "--no-update", "--json")
    got = json.loads(res.output)
    assert [c["codebase"] for c in got["codebases"]] == [str(http)], got["codebases"]
    assert f"{http / 'app'} lies inside the member {http}: searched as part of it" in got["note"], got["note"]


def test_a_member_of_two_chunks_is_judged_by_its_nearest_not_by_its_unrelated_second(tmp_path, codii_home):
    """A new user's workspace: a member of billing.py and a garden note, beside 60 functions of tokens matching
    nothing. The mean of a member's 10 nearest chunks was the mean of its two (0.23), under the other member's
    (0.27): its one answer, cosine 0.44, came after all 50 results. Under 20 chunks, the nearest half counts."""
    tiny = write_tree(tmp_path / "tiny", {
        "billing.py": 'def issue_refund(invoice, amount):\n    """Issue a refund against an invoice, crediting the '
                      'customer\'s card."""\n    if amount > invoice.total:\n        raise ValueError("refund exceeds '
                      'invoice total")\n    invoice.refunds.append(amount)\n    return invoice.customer.card.credit('
                      'amount)\n',
        "garden.md": "# Garden notes\n\nTomatoes need sun. Water the basil every morning.\n"})
    tokens = "\n".join(f"def func_{i}(x):\n    value = 'zebrafish_{i}' + " + " + ".join(f"'token{j}_{i}'" for j in range(80))
                       + f"\n\n\n    return value  # returns zebrafish {i}\n" for i in range(60))
    noise = write_tree(tmp_path / "noise", {"longlines.py": tokens})
    assert run("build", tiny, noise).exit_code == 0
    found = service.search(service.SearchRequest("how is money returned to a customer", SearchOptions(limit=10),
                                                 [str(noise), str(tiny)], update=False))
    assert (found.results[0].codebase, found.results[0].path) == (str(tiny), "billing.py")
    match = {m.codebase: m.match for m in found.members}
    assert match[str(tiny)] == pytest.approx(found.best_cosine, abs=1e-4) and match[str(tiny)] > match[str(noise)]
    probe = service.open_searcher(service.open_codebase(tiny))
    try:  # the cheap probe of a workspace search reads the same
        assert probe.match(probe.embedder.embed_query("how is money returned to a customer")) == pytest.approx(
            match[str(tiny)], abs=1e-6)
    finally:
        probe.store.close()


def test_workspaces_past_a_small_budget_are_counted_not_listed(monkeypatch, tmp_path):
    """A new user's 28 workspaces came back at max_tokens=100 as ~1,530 tokens of names, members all cut."""
    from codii_sql.search.budget import json_tokens
    from codii_sql.service.paging import fit_workspaces

    rows = [{"name": f"ws{i}", "source": "registry", "members": [
        {"codebase": str(tmp_path / f"m{i}_{j}"), "status": "indexed"} for j in range(2)]} for i in range(28)]
    fitted = fit_workspaces(rows, 100)
    assert fitted["truncated"] and 0 < len(fitted["workspaces"]) < 28
    assert len(fitted["workspaces"]) + fitted["more_workspaces"] == 28 and "workspaces and" in fitted["note"]
    assert json_tokens(fitted["workspaces"]) <= 200
    assert fit_workspaces(rows, 100_000) == {"workspaces": rows}


def test_a_member_whose_results_carry_no_cosine_is_judged_by_bm25_evidence(tmp_path, embedder):
    """A new user's rxjs copy with 390 of 2,454 vectors (then vectors off) took all 4 places of a gin question:
    its index had a cosine, so its evidence went unjudged, but its results were chunks without vectors,
    whose fused scores then counted in full beside gin's weighed ones."""
    from codii_sql.ingest.indexer import Indexer
    from codii_sql.search.searcher import Searcher
    from codii_sql.storage.store import Store

    repo = write_tree(tmp_path / "rx", {"src/util.py": "def alpha_beta():\n    return 1\n"})
    cb = Codebase.open(repo)
    Indexer(cb, embedder).build()
    (repo / "src" / "ajax.ts").write_text("export function isURLSearchParams(value) {\n"
                                          "  return value instanceof URLSearchParams; // a path of the URL\n}\n")
    Indexer(cb, embedder, vectors=False).build()
    with Store(cb.db_path, create=False) as store:
        hits = Searcher(store, cb.root, embedder).find("where is the router tree searched for a path", SearchOptions())
    assert hits.best_cosine is not None and hits.results[0].path == "src/ajax.ts"
    assert hits.results[0].knn_match is None and hits.lexical_evidence is False


def test_a_members_note_gives_its_match_with_the_decimals_that_tell_it_from_the_best():
    """A new user's workspace note read "its nearest chunks match the query less (0.39 against 0.39)"."""
    from codii_sql.service.searching import _against

    assert _against(0.3912, 0.3948) == "0.391 against 0.395"
    assert _against(0.436, 0.466) == "0.44 against 0.47"


def test_the_best_matching_member_outranked_is_not_said_to_match_less():
    """A new user's workspace note said penlight's nearest chunks "match the query less (0.2170 against 0.2170)":
    the member that matched best of all had ranked below the others' results (members without vectors rank by
    their words)."""
    from collections import namedtuple

    from codii_sql.search.answer import Member
    from codii_sql.search.searcher import Hits
    from codii_sql.service.fanout import Fanned
    from codii_sql.service.searching import _outranked_notes
    from codii_sql.service.shards import ShardAnswer

    shard = namedtuple("Shard", "name")

    best, weaker, shown = shard("/src/penlight"), shard("/src/magit"), shard("/src/tokio")
    hit = [Result(id=1, path="a.lua", start_line=1, end_line=2, content="x", kind="function", symbol="f",
                  language="lua", score=1.0, stale=None, role="source")]
    answers = {s: ShardAnswer(Hits(hit, None, None, False)) for s in (best, weaker, shown)}
    members = [Member(best.name, "searched", 0, match=0.217), Member(weaker.name, "searched", 0, match=0.19),
               Member(shown.name, "searched", 1, match=None)]
    notes = {n.codebase: n.what for n in _outranked_notes(Fanned(answers, None), members, SearchOptions(limit=1))}
    assert "match the query less" not in notes[best.name] and "rank below" in notes[best.name], notes
    assert "match the query less (0.19 against 0.22)" in notes[weaker.name], notes


def test_a_member_without_vectors_does_not_silence_the_workspace_s_no_match(two, tmp_path, codii_home):
    """A new user's workspace of four members with vectors and redis built --no-vectors flagged none of 10 unrelated
    questions (8 of 10 without redis): a member that cannot judge by cosine agrees when no chunk of it holds every
    word of the question; one that holds them still keeps the flag off."""
    http, shop = two
    plain = write_tree(tmp_path / "plain", {"notes.py": "def tally_orders(rows):\n    return sum(r.total for r in rows)\n",
                                            "cup.py": "# who won the world cup final in 1998\nWINNER = 'fr'\n"})
    assert run("build", plain, "--no-vectors").exit_code == 0
    roots = [http, shop, plain.resolve()]
    nonsense = ask("chocolate cake recipe for orders of vanilla frosting", SearchOptions(limit=3), roots)  # a word it holds
    assert nonsense.no_good_match, [(m.codebase, m.status) for m in nonsense.members]
    held = ask("who won the world cup final in 1998", SearchOptions(limit=3), roots)  # the BM25 member holds it
    assert not held.no_good_match, held.notes


def test_a_budget_too_small_for_a_workspace_s_rows_is_refused_with_the_least_that_holds_it(tmp_path, codii_home):
    """A new user's five-member workspace at max_tokens 400 answered 476-502 tokens on 10 of 10 queries: the
    members' rows and notes took the budget before a result. It is refused, naming a budget that holds it, and
    that budget is kept."""
    roots = []
    for i in range(6):
        root = write_tree(tmp_path / f"a_rather_long_folder_name_for_member_number_{i}_of_this_workspace",
                          {f"m{i}.py": f"def handle_request_{i}(req):\n    return req.body\n"})
        assert run("build", root, "--no-vectors").exit_code == 0
        roots.append(root.resolve())
    with pytest.raises(UsageError) as refused:
        ask("handle the request body", SearchOptions(limit=10, max_tokens=400), roots)
    least = int(refused.value.hint.rsplit(" ", 1)[-1])
    assert refused.value.field == "max_tokens" and "6 codebases" in refused.value.what and least > 400
    answer = ask("handle the request body", SearchOptions(limit=10, max_tokens=least), roots)
    assert answer.results and answer.budget.used_tokens <= least, answer.budget
