"""Analysis tools behind the scripts of Luong et al.'s evaluation (section 5).

Not imported by the plugin itself (fairseq-train does not need matplotlib):
``scripts/eval/force_align.py``, ``aer.py``, ``bleu_by_length.py``, ``plot_attention.py``,
``plot_curves.py`` and ``benchmark_*.py`` import the modules they use.
"""
