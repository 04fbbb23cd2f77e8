"""A local Hugging Face hub cache for tests: no network exists here, so a hub
data set is placed where ``huggingface_hub`` keeps downloads
(``<HF_HUB_CACHE>/datasets--OWNER--NAME/snapshots/<commit>/...`` with
``refs/main`` naming the commit).  With ``HF_HUB_OFFLINE=1`` and
``HF_HUB_CACHE`` pointing there, ``snapshot_download`` answers from it: the
product's code path is the one a real download takes, only the download is
replaced."""

from __future__ import annotations

import json
from pathlib import Path

#: the commit the cached snapshot claims to be (any 40 hex digits)
COMMIT = "0123456789abcdef0123456789abcdef01234567"
#: the paper's targets on the hub, and their local copy beside the checkout
D3K_REPO = "LukeBailey181Pub/D_3k"
D3K_FILE = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "d3k_targets.json"


def hub_cache(root: Path, repo_id: str, files: dict[str, bytes]) -> Path:
    """A hub cache under ``root`` holding the data set ``repo_id`` with
    ``files`` (path in the repository -> content); returns the cache directory."""
    repo = root / ("datasets--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / COMMIT
    for name, content in files.items():
        (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
        (snapshot / name).write_bytes(content)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(COMMIT)
    return root


def d3k_rows(limit: int | None = None) -> list[dict]:
    """The D3k records of the local copy, in file order."""
    rows = list(json.loads(D3K_FILE.read_text(encoding="utf-8"))["target_statements"].values())
    return rows[:limit]


def parquet_bytes(rows: list[dict], path: Path) -> bytes:
    """``rows`` as a Parquet table, the format ``datasets``' ``push_to_hub`` uploads."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path.read_bytes()
