"""Building blocks of fairseq_luong's models (one component per file)."""
