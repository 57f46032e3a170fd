"""The evaluation report: the engine's JSON report, with table views."""

from __future__ import annotations

from typing import Any, Dict, List


class Report:
    """What :func:`hoprag.evaluate` returns: ``.data`` is the report ``hoprag eval --json``
    writes (a dict); the accessors below only read it."""

    def __init__(self, data: Dict[str, Any]):
        self.data = data

    @property
    def methods(self) -> List[str]:
        return list(self.data["methods"])

    @property
    def ks(self) -> List[int]:
        return list(self.data["ks"])

    @property
    def n(self) -> int:
        """Questions evaluated."""
        return self.data["n"]

    def recall(self, method: str, k: int) -> float:
        """R@k of ``method`` (a fraction, 0 to 1)."""
        return self.data["methods"][method]["recall"][str(k)]

    def rows(self) -> List[Dict[str, Any]]:
        """One row per method: R@k, Full@k and LastHop@k for every k, and p50 latency."""
        rows = []
        for name, m in self.data["methods"].items():
            row: Dict[str, Any] = {"method": name}
            for metric, label in (("recall", "R"), ("full", "Full"), ("last_hop", "LastHop")):
                for k in self.ks:
                    row[f"{label}@{k}"] = m[metric].get(str(k))
            row["p50_ms"] = m["latency_ms"]["p50"]
            rows.append(row)
        return rows

    def to_pandas(self):
        """The rows as a pandas DataFrame indexed by method (needs pandas)."""
        try:
            import pandas as pd
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("Report.to_pandas needs pandas: pip install pandas") from e
        return pd.DataFrame(self.rows()).set_index("method")

    def __repr__(self) -> str:
        cells = ", ".join(f"{r['method']} R@5={r.get('R@5')}" for r in self.rows())
        return f"Report({self.data['dataset']!r}, n={self.n}: {cells})"
