"""A profile written by numalens is read by pyarrow as the docs show, with the documented types."""

import json
import os
import subprocess
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[2]
TABLES = ["samples", "threads", "sites", "objects", "page_stats", "migrations", "page_nodes",
          "code_locations"]


def numalens_binary():
    explicit = os.environ.get("NUMALENS")
    if explicit:
        return explicit
    built = ROOT / "target" / "debug" / "numalens"
    if not built.exists():
        subprocess.run(["cargo", "build", "-q", "-p", "numalens"], cwd=ROOT, check=True)
    return str(built)


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    """A real recording: `numalens demo` builds a bundled workload, records it and reports."""
    tmp = tmp_path_factory.mktemp("p")
    out = tmp / "demo.numalens"
    subprocess.run(
        [numalens_binary(), "demo", "-o", str(out), "--html", str(tmp / "demo.html")],
        check=True,
        capture_output=True,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp / "cache")},
    )
    return out


def test_every_table_reads_with_the_row_count_of_meta(profile):
    meta = json.loads((profile / "meta.json").read_text())
    assert meta["format_version"].split(".")[0] == "1"
    for table in TABLES:
        t = pq.read_table(profile / f"{table}.parquet")
        assert t.num_rows == meta["tables"][table]["rows"], table


def test_sample_columns_have_the_documented_types(profile):
    t = pq.read_table(profile / "samples.parquet")
    assert t.column_names == [
        "time_ns", "pid", "tid", "cpu", "address", "kind", "weight",
        "object_id", "node", "data_source", "latency", "ip", "page_size", "snoop",
    ]
    assert str(t.schema.field("time_ns").type) == "uint64"
    assert str(t.schema.field("address").type) == "uint64"
    assert str(t.schema.field("kind").type) == "dictionary<values=string, indices=uint8, ordered=0>"
    kinds = set(pc.unique(t.column("kind").combine_chunks().dictionary_decode()).to_pylist())
    assert kinds <= {"load", "store", "first-touch", "hint", "fault"}
    assert kinds, "some samples"


def test_weights_add_up_per_thread_and_objects_join(profile):
    samples = pq.read_table(profile / "samples.parquet", columns=["tid", "weight", "object_id"])
    per_thread = samples.group_by("tid").aggregate([("weight", "sum")])
    threads = pq.read_table(profile / "threads.parquet", columns=["tid"])
    assert set(per_thread.column("tid").to_pylist()) <= set(threads.column("tid").to_pylist())
    total = pc.sum(per_thread.column("weight_sum")).as_py()
    assert total == pc.sum(samples.column("weight")).as_py()
    objects = pq.read_table(profile / "objects.parquet", columns=["object_id", "name"])
    attributed = samples.filter(pc.is_valid(samples.column("object_id")))
    assert attributed.num_rows > 0.9 * samples.num_rows
    joined = attributed.join(objects, "object_id")
    assert joined.num_rows == attributed.num_rows, "every sample's object exists"


def test_time_filter_with_the_dataset_api(profile):
    dataset = ds.dataset(profile / "samples.parquet", format="parquet")
    times = dataset.to_table(columns=["time_ns"]).column("time_ns")
    middle = (pc.min(times).as_py() + pc.max(times).as_py()) // 2
    first = dataset.to_table(filter=ds.field("time_ns") < middle, columns=["time_ns"])
    assert 0 < first.num_rows < dataset.count_rows()
