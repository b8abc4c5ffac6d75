"""tasks of fairseq_luong (imported explicitly by the package)."""
