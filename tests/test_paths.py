"""Where index files live: their names keep the codebase folder's letters, whatever the script."""

from __future__ import annotations

from pathlib import Path

from codii_sql import paths


def test_index_file_names_keep_letters_and_digits_of_any_script(tmp_path):
    for folder, stem in [("ünïcode-repo", "ünïcode-repo"), ("日本語プロジェクト2", "日本語プロジェクト2"),
                         ("naïve proj (copy)!", "naïve_proj_copy"), ("ünï".encode().decode("latin-1"), "Ã¼nÃ"),
                         ("e\u0301t\u00e9", "\u00e9t\u00e9"), ("..", "root"), ("bad\udcffname", "bad_name")]:
        name = paths.default_db_path(tmp_path / folder).name
        assert name.rsplit("-", 1)[0] == stem, (folder, name)
        assert all(ch.isalnum() or ch in "._-" for ch in name), name


def test_an_index_made_under_the_ascii_name_stays_in_use(tmp_path, codii_home):
    root = Path(tmp_path / "ünïcode-repo")
    new = paths.default_db_path(root)
    legacy = new.with_name("n_code-repo-" + new.name.rsplit("-", 1)[1])  # how names were made before
    legacy.parent.mkdir(parents=True, exist_ok=True)
    legacy.write_bytes(b"")
    assert paths.default_db_path(root) == legacy
    new.write_bytes(b"")
    assert paths.default_db_path(root) == new


def test_an_index_s_bytes_count_a_log_deleted_meanwhile_as_none(tmp_path, monkeypatch):
    """The last connection to close deletes the -wal file: between an exists and a stat it was gone, and a new
    user's HTTP status page answered 500 (3 of 2,244 requests while greps ran)."""
    from codii_sql.paths import index_bytes

    db = tmp_path / "x.db"
    db.write_bytes(b"\0" * 4096)
    (tmp_path / "x.db-wal").write_bytes(b"\0" * 100)
    assert index_bytes(db) == 4196
    real = Path.stat

    def stat(self, *args, **kwargs):
        if self.name.endswith("-wal"):
            raise FileNotFoundError(2, "gone", str(self))  # deleted just now
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "exists", lambda self, *a, **k: True)
    monkeypatch.setattr(Path, "stat", stat)
    assert index_bytes(db) == 4096
