"""JSON-safe values for report.json: no NaN or infinity (null instead), Python numbers instead of numpy's."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def number(value):
    """A JSON-safe number: NaN and ±inf become None; numpy scalars become Python ones."""
    if value is None or value is pd.NA:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    value = float(value)
    return None if math.isnan(value) or math.isinf(value) else value


def count(value):
    """A JSON integer (counts read back from a mixed-type row arrive as floats)."""
    value = number(value)
    return None if value is None else int(value)


def numbers(values) -> list:
    """A column as JSON-safe numbers (NaN and ±inf → None), without a Python call per value."""
    array = np.asarray(values, dtype=np.float64)
    result = array.astype(object)
    result[~np.isfinite(array)] = None
    return result.tolist()


def counts(values) -> list:
    """A column of counts as Python integers."""
    return np.asarray(values, dtype=np.int64).tolist()
