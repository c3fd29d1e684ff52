"""Load mdtp results files (HDF5) into plain Python: numpy record arrays and attribute dicts.

Layout (README, "Results files"): one group per run under /runs/<NNNN>-<kind>, provenance as
attributes, every table a compound dataset.  Only h5py and numpy are needed; pandas is optional:

    import mdtp_results
    runs = mdtp_results.load_runs("results/experiment.h5")        # {"0001-calibrate": Run, ...}
    for name, run in runs.items():
        print(name, run.kind, run.attrs["mode"], run.tables["summary"]["step_s"])
    # pandas.DataFrame(run.tables["comm"]) gives a data frame, if pandas is installed.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Optional

import h5py
import numpy as np


@dataclasses.dataclass
class Run:
    name: str                      # "0003-bench"
    kind: str                      # "bench", "calibrate", ...
    attrs: Dict[str, object]       # provenance and run settings (str, int or float)
    tables: Dict[str, np.ndarray]  # record arrays; text columns decoded to str

    @property
    def number(self) -> int:
        return int(self.name.split("-", 1)[0])


def _decode(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.generic):
        return value.item()
    return value


def _decode_table(data: np.ndarray) -> np.ndarray:
    """Fixed-length byte-string columns become unicode, so comparisons with str work."""
    if data.dtype.names is None:
        return data
    fields = []
    for name in data.dtype.names:
        kind = data.dtype[name].kind
        fields.append((name, f"U{max(1, data.dtype[name].itemsize)}" if kind == "S" else data.dtype[name]))
    out = np.empty(data.shape, dtype=fields)
    for name in data.dtype.names:
        column = data[name]
        out[name] = np.char.decode(column, "utf-8") if column.dtype.kind == "S" else column
    return out.view(np.recarray)


def load_runs(path: str, kind: Optional[str] = None) -> Dict[str, Run]:
    """Every run of the file (or only those of `kind`), ordered by run number."""
    runs: Dict[str, Run] = {}
    with h5py.File(path, "r") as f:
        if "runs" not in f:
            return runs
        for name in sorted(f["runs"].keys()):
            group = f["runs"][name]
            run_kind = name.split("-", 1)[1] if "-" in name else ""
            if kind is not None and run_kind != kind:
                continue
            attrs = {key: _decode(value) for key, value in group.attrs.items()}
            tables = {key: _decode_table(group[key][()]) for key in group.keys()
                      if isinstance(group[key], h5py.Dataset)}
            runs[name] = Run(name, run_kind, attrs, tables)
    return runs


def latest_batch(runs: Dict[str, Run], kind: str = "bench") -> Dict[str, Run]:
    """The runs of the most recent invocation of a driver (runs sharing its `batch_id`)."""
    selected = [r for r in runs.values() if r.kind == kind]
    if not selected:
        return {}
    last = max(selected, key=lambda r: r.number).attrs.get("batch_id")
    return {r.name: r for r in selected if r.attrs.get("batch_id") == last}
