"""Console adapter: terminal play with rich (the embedded default; no tokens needed)."""
