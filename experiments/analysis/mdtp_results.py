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
    attrs: Dict[str, object]       # provenance and run settings (str, int or float; never bytes)
    tables: Dict[str, np.ndarray]  # record arrays; text columns decoded to str (never bytes)

    @property
    def number(self) -> int:
        return int(self.name.split("-", 1)[0])


def _text(value):
    """HDF5 text as str: h5py reads mdtp's fixed-length strings (attributes and compound columns) as
    bytes (numpy.bytes_ scalars, 'S' arrays) and variable-length ones as bytes objects ('O' arrays).
    The one place this module decodes; anything that is not text comes back unchanged."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if (isinstance(value, np.ndarray) and value.dtype.kind in "SO"
            and all(isinstance(v, (bytes, str)) for v in value.flat)):
        return np.array([_text(v) for v in value.flat], dtype=str).reshape(value.shape)
    return value


def _decode(value):
    """An attribute: str for text, plain int/float for numeric scalars."""
    value = _text(value)
    return value.item() if isinstance(value, np.generic) else value


def _decode_table(data: np.ndarray) -> np.ndarray:
    """A dataset with its text decoded: string columns of a compound (table) dataset become unicode
    columns of a record array, so comparisons with str work; a plain dataset is decoded as a whole."""
    if data.dtype.names is None:
        return _text(data)
    columns = {name: np.asarray(_text(data[name])) for name in data.dtype.names}
    out = np.empty(data.shape, dtype=[(name, c.dtype, c.shape[data.ndim:]) for name, c in columns.items()])
    for name, column in columns.items():
        out[name] = column
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
