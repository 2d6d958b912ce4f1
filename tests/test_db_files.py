"""The tuning database's files: corrupt ones reported and kept, the search path, the file tools
(merge, prune, export)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from db_builders import DEVICE, ENV, entry, open_db, write_db

from stuning.db import (
    SCHEMA_VERSION,
    CorruptDatabaseError,
    Environment,
    StaleEntriesWarning,
    TuningDB,
    db_file_name,
    load_document,
    merge_files,
    paths,
    prune_stale,
)

HELPER = Path(__file__).resolve().parent / "db_writer_proc.py"

pytestmark = pytest.mark.usefixtures("isolated_db_dirs")


# -- corrupt files ---------------------------------------------------------------------------------

@pytest.mark.parametrize("content, reason", [
    (b"{not json", "invalid JSON"),
    (b"\xff\xfe", "invalid JSON"),
    (json.dumps({"schema_version": 99}).encode(), "lacks"),
    (b'{"a": 1, "a": 2}', "duplicate key"),
])
def test_corrupt_file_is_reported_and_never_overwritten(tmp_path, content, reason):
    path = tmp_path / db_file_name(DEVICE)
    path.write_bytes(content)
    with pytest.raises(CorruptDatabaseError, match=reason) as caught:
        open_db(tmp_path)
    assert str(path) in str(caught.value)
    db = open_db(tmp_path / "elsewhere", write_dir=tmp_path)
    db.put(entry(), "spmm|float16|m=1")
    with pytest.raises(CorruptDatabaseError) as caught:
        db.save()
    assert str(path) in str(caught.value)
    assert path.read_bytes() == content


def test_wrong_schema_version_names_the_file(tmp_path):
    path = write_db(tmp_path, {"k": entry()})
    doc = json.loads(path.read_text())
    doc["schema_version"] = SCHEMA_VERSION + 1
    path.write_text(json.dumps(doc))
    before = path.read_bytes()
    with pytest.raises(CorruptDatabaseError, match="schema_version 2 is not supported") as caught:
        load_document(path)
    assert caught.value.path == str(path) and isinstance(caught.value, ValueError)
    db = open_db(tmp_path / "other", write_dir=tmp_path)
    db.put(entry(), "k")
    with pytest.raises(CorruptDatabaseError):
        db.save()
    assert path.read_bytes() == before


# -- search path -----------------------------------------------------------------------------------

def test_search_path_order_and_write_directory(tmp_path, monkeypatch):
    override, cache, shipped = tmp_path / "override", tmp_path / "cache", tmp_path / "shipped"
    for directory, time_us in ((override, 1.0), (cache, 2.0), (shipped, 3.0)):
        directory.mkdir()
        write_db(directory, {"both": entry(time_us), f"only-{directory.name}": entry(time_us)})
    monkeypatch.setenv(paths.ENV_DB_DIR, str(override))
    assert paths.default_search_path() == [override, cache, shipped]
    db = TuningDB.open(DEVICE, env=ENV)
    assert db.get("both").best.time_us == 1.0
    assert {k: db.get(k).best.time_us for k in ("only-override", "only-cache", "only-shipped")} == {
        "only-override": 1.0, "only-cache": 2.0, "only-shipped": 3.0}
    assert db.write_path == override / db_file_name(DEVICE)

    monkeypatch.delenv(paths.ENV_DB_DIR)
    db = TuningDB.open(DEVICE, env=ENV)
    assert db.get("both").best.time_us == 2.0 and db.get("only-override") is None
    assert db.write_path == cache / db_file_name(DEVICE)
    before = (shipped / db_file_name(DEVICE)).read_bytes()
    db.put(entry(0.5), "new")
    assert db.save() == cache / db_file_name(DEVICE)
    assert (shipped / db_file_name(DEVICE)).read_bytes() == before  # the shipped file is never written


def test_cache_directory_is_created_on_first_save(tmp_path):
    db = TuningDB.open(DEVICE, env=ENV)
    assert db.files == [] and db.save() is None  # nothing to write: nothing created
    assert not (tmp_path / "cache").exists()
    db.put(entry(), "k")
    assert db.save() == tmp_path / "cache" / db_file_name(DEVICE)


def test_explicit_search_path_never_writes_the_shipped_directory(tmp_path):
    shipped = paths.shipped_dir()
    db = TuningDB.open(DEVICE, search_path=[shipped, tmp_path / "mine"], env=ENV)
    assert db.write_path.parent == tmp_path / "mine"
    forced = TuningDB.open(DEVICE, search_path=[shipped], env=ENV, write_dir=shipped)
    assert forced.write_path.parent == shipped


def test_shipped_directory_is_the_package_data(monkeypatch):
    monkeypatch.undo()  # the real paths.shipped_dir
    assert (paths.shipped_dir() / "__init__.py").is_file()
    assert paths.shipped_dir().name == "tuning_db"


# -- file tools ------------------------------------------------------------------------------------

def test_merge_files_prune_stale_and_export(tmp_path):
    old = Environment(DEVICE, triton="2.0.0")
    a = write_db(tmp_path / "a", {"shared": entry(5.0, {"c": 1}), "a": entry(1.0)})
    b = write_db(tmp_path / "b", {
        "shared": entry(3.0, {"c": 2}), "b": entry(measured=False, predicted_us=2.0), "old": entry(env=old),
    })
    out = tmp_path / "merged.json"
    merged = merge_files([a, b], out)
    assert set(merged["entries"]) == {"shared", "a", "b", "old"}
    assert merged["entries"]["shared"]["best"] == {"config": {"c": 2}, "time_us": 3.0}
    assert load_document(out) == merged
    assert prune_stale(out, keep_env=ENV) == 1
    assert set(load_document(out)["entries"]) == {"shared", "a", "b"}

    other_device = tmp_path / "x" / db_file_name("NVIDIA A100")
    other_device.parent.mkdir()
    a100 = Environment("NVIDIA A100", triton="3.2.0")
    db = TuningDB.open("NVIDIA A100", search_path=[other_device.parent], env=a100)
    db.put(entry(env=a100), "k")
    db.save()
    with pytest.raises(ValueError, match="different devices"):
        merge_files([a, other_device], tmp_path / "bad.json")

    with pytest.warns(StaleEntriesWarning):
        db = open_db(tmp_path / "b")
    exported = tmp_path / "export.json"
    assert db.export(exported, measured_only=True) == 1
    assert set(load_document(exported)["entries"]) == {"shared"}
